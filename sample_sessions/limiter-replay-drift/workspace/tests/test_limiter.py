from gateway.limiter import TokenBucket


def test_burst_of_twenty_is_allowed():
    bucket = TokenBucket()
    allowed = sum(bucket.allow() for _ in range(20))
    assert allowed == 20, f"{allowed} allowed, expected 20"


def test_refill_restores_tokens():
    bucket = TokenBucket(capacity=2, refill_per_second=1.0)
    assert bucket.allow() and bucket.allow() and not bucket.allow()
    bucket.refill(1.0)
    assert bucket.allow()
