package fauxqs

import (
	"net/http"
	"syscall"
	"testing"
	"time"
)

func TestStartServesHealthOnLoopbackAndStopKillsByPID(t *testing.T) {
	s := Start(t)
	resp, err := http.Get(s.URL + "/health")
	if err != nil {
		t.Fatalf("health: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("health status %d", resp.StatusCode)
	}
	if s.PID <= 0 {
		t.Fatalf("PID %d", s.PID)
	}
	s.Stop()
	s.Stop() // idempotent
	if err := syscall.Kill(s.PID, 0); err == nil {
		t.Fatalf("process %d still exists after Stop", s.PID)
	}
	c := http.Client{Timeout: time.Second}
	if resp, err := c.Get(s.URL + "/health"); err == nil {
		resp.Body.Close()
		t.Fatalf("server still answers after Stop")
	}
}
