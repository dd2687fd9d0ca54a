package sidecar

import (
	"fmt"
	"net/url"
	"path/filepath"

	// The backends the sidecar can open; each registers its URL scheme.
	_ "github.com/statesidecar/state/backend/memstate"
	_ "github.com/statesidecar/state/backend/pgstate"
	_ "github.com/statesidecar/state/backend/redisstate"
	_ "github.com/statesidecar/state/backend/sqlitestate"
	// --- object-store backends (issue 23) ---
	_ "github.com/statesidecar/state/backend/filestate"
	_ "github.com/statesidecar/state/backend/s3state"
	// --- end object-store backends ---
)

// StoreURL returns the state.Open URL of the configured backend: a
// "sqlite:///abs/path" URL of DBPath (made absolute, with the parameter
// lock_timeout when SQLiteLockTimeout is set), RedisURL,
// DatabaseURL, "mem://", S3URL, or a "file:///abs/dir" URL of StateDir.
func (c Config) StoreURL() (string, error) {
	if c.storeURL != "" {
		return c.storeURL, nil
	}
	switch c.Backend {
	case BackendSQLite:
		abs, err := filepath.Abs(c.DBPath)
		if err != nil {
			return "", fmt.Errorf("DB_PATH %q: %w", c.DBPath, err)
		}
		u := &url.URL{Scheme: "sqlite", Path: filepath.ToSlash(abs)}
		if c.SQLiteLockTimeout > 0 {
			u.RawQuery = url.Values{"lock_timeout": {c.SQLiteLockTimeout.String()}}.Encode()
		}
		return u.String(), nil
	case BackendRedis:
		return c.RedisURL, nil
	case BackendPostgres:
		if c.DatabaseURL == "" {
			return "", fmt.Errorf("%w: DATABASE_URL (or -database-url) must be set for STATE_BACKEND=postgres", ErrConfig)
		}
		return c.DatabaseURL, nil
	case BackendMemory:
		return "mem://", nil
	// --- object-store backends (issue 23) ---
	case BackendS3:
		if c.S3URL == "" {
			return "", fmt.Errorf("%w: S3_URL (or -s3-url) must be set for STATE_BACKEND=s3", ErrConfig)
		}
		return c.S3URL, nil
	case BackendFile:
		abs, err := filepath.Abs(c.StateDir)
		if err != nil {
			return "", fmt.Errorf("STATE_DIR %q: %w", c.StateDir, err)
		}
		return (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String(), nil
		// --- end object-store backends ---
	}
	return "", fmt.Errorf("%w: unknown backend %q", ErrConfig, c.Backend)
}
