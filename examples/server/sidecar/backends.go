package sidecar

import (
	"fmt"
	"net/url"
	"path/filepath"

	// The backends the sidecar can open; each registers its URL scheme.
	_ "github.com/statesidecar/state/backend/memstate"
	_ "github.com/statesidecar/state/backend/redisstate"
	_ "github.com/statesidecar/state/backend/sqlitestate"
)

// StoreURL returns the state.Open URL of the configured backend: a
// "sqlite:///abs/path" URL of DBPath (made absolute), RedisURL, or "mem://".
func (c Config) StoreURL() (string, error) {
	switch c.Backend {
	case BackendSQLite:
		abs, err := filepath.Abs(c.DBPath)
		if err != nil {
			return "", fmt.Errorf("DB_PATH %q: %w", c.DBPath, err)
		}
		return (&url.URL{Scheme: "sqlite", Path: filepath.ToSlash(abs)}).String(), nil
	case BackendRedis:
		return c.RedisURL, nil
	case BackendMemory:
		return "mem://", nil
	}
	return "", fmt.Errorf("%w: unknown backend %q", ErrConfig, c.Backend)
}
