package sluice

import "errors"

// openEngine opens the runner engine over adapters/osfs in dir.
func openEngine(dir string, cfg Config, syncs *counter) (engine, error) {
	_, _, _ = dir, cfg, syncs
	return nil, errors.New("sluice: runner engine not wired yet")
}
