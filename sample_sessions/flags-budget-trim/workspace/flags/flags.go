// Package flags holds the checkout service's feature flags and their production defaults.
package flags

// Defaults are the production values of every flag. Changing one changes production.
var Defaults = map[string]bool{
	"checkout_v2":     false,
	"express_pay":     true,
	"address_autofill": true,
}

// Enabled reports whether a flag is on: an override wins over the production default.
func Enabled(name string, overrides map[string]bool) bool {
	if value, ok := overrides[name]; ok {
		return value
	}
	return Defaults[name]
}
