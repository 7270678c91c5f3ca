package flags

import "testing"

func TestCheckoutV2Enabled(t *testing.T) {
	overrides := map[string]bool{}
	if !Enabled("checkout_v2", overrides) {
		t.Fatalf("expected flag checkout_v2 enabled, got disabled")
	}
}

func TestExpressPayDefault(t *testing.T) {
	if !Enabled("express_pay", nil) {
		t.Fatalf("expected flag express_pay enabled by default")
	}
}
