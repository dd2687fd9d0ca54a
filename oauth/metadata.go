package oauth

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
)

// WellKnownPath is where RFC 9728 puts protected-resource metadata.
const WellKnownPath = "/.well-known/oauth-protected-resource"

// Metadata is a protected resource's metadata (RFC 9728, section 2).
type Metadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers"`
	ScopesSupported        []string `json:"scopes_supported,omitempty"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	ResourceName           string   `json:"resource_name,omitempty"`
}

// Metadata returns the resource's metadata: its audience as the resource,
// the issuer as its authorization server, and scopes and name as given.
func (v *Verifier) Metadata(scopes []string, name string) Metadata {
	return Metadata{Resource: v.cfg.Audience, AuthorizationServers: []string{v.cfg.Issuer},
		ScopesSupported: scopes, BearerMethodsSupported: []string{"header"}, ResourceName: name}
}

// MetadataPaths returns the paths the metadata of resource is served at:
// RFC 9728's, the well-known path followed by the resource's path (for
// https://host/mcp, /.well-known/oauth-protected-resource/mcp), and the
// bare well-known path, which clients of the MCP specification also try.
func MetadataPaths(resource string) []string {
	paths := []string{WellKnownPath}
	if u, err := url.Parse(resource); err == nil {
		if p := strings.TrimSuffix(u.EscapedPath(), "/"); p != "" {
			paths = append([]string{WellKnownPath + p}, paths...)
		}
	}
	return paths
}

// MetadataURL returns the URL of resource's metadata (RFC 9728, section
// 3.1), the one a 401's resource_metadata parameter names.
func MetadataURL(resource string) string {
	u, err := url.Parse(resource)
	if err != nil {
		return ""
	}
	return u.Scheme + "://" + u.Host + MetadataPaths(resource)[0]
}

// MetadataHandler serves m as JSON to GET requests.
func MetadataHandler(m Metadata) http.Handler {
	body, _ := json.Marshal(m) // plain strings: cannot fail
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "max-age=300")
		w.Header().Set("Access-Control-Allow-Origin", "*")
		_, _ = w.Write(body)
	})
}

// Challenge returns the WWW-Authenticate value of a 401 answer (RFC 6750
// and RFC 9728 section 5.1): Bearer with resource_metadata, and, when err
// is not nil, error="invalid_token" with its message as the description.
func Challenge(resource string, err error) string {
	c := `Bearer resource_metadata="` + MetadataURL(resource) + `"`
	if err != nil {
		c += `, error="invalid_token", error_description="` + quoteSafe(err.Error()) + `"`
	}
	return c
}

// quoteSafe keeps what may appear inside a quoted header parameter.
func quoteSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '"' || r == '\\' || r < 0x20 || r > 0x7e {
			return '\''
		}
		return r
	}, s)
}
