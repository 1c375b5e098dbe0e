package config

import "testing"

func TestTokenRoundTrips(t *testing.T) {
	const tok = "off=write.late.bunch.damage,boost=sync*16,nodes=1,workers=0,jobs=3,safety-ms=41000"
	p, err := ParseToken(tok)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.String(), tok; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	for _, bad := range []string{"nodes", "off=nope", "jobs=-1", "colour=red", "boost=sync", "boost=sync*0"} {
		if _, err := ParseToken(bad); err == nil {
			t.Errorf("ParseToken(%q) = nil error", bad)
		}
	}
}
