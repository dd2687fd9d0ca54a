package oauth_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"strings"

	"github.com/statesidecar/state/oauth"
)

// A resource server checks each request's bearer token and answers a
// refusal with a challenge that points clients at its metadata.
func Example() {
	ctx := context.Background()
	v, err := oauth.New(ctx, oauth.Config{
		Issuer:      "https://login.example.com",
		Audience:    "https://state.example.com/mcp",
		TenantClaim: "tenant",
	})
	if err != nil {
		log.Fatal(err) // the issuer could not be discovered
	}
	mux := http.NewServeMux()
	md := oauth.MetadataHandler(v.Metadata([]string{"state:read", "state:write"}, "My server"))
	for _, p := range oauth.MetadataPaths(v.Audience()) {
		mux.Handle(p, md)
	}
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		claims, err := v.Verify(r.Context(), tok)
		if errors.Is(err, oauth.ErrInvalidToken) {
			w.Header().Set("WWW-Authenticate", oauth.Challenge(v.Audience(), err))
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		fmt.Fprintf(w, "hello %s of %s, scopes %v", claims.Subject, claims.Tenant, claims.Scopes)
	})
	log.Fatal(http.ListenAndServe("127.0.0.1:8080", mux))
}
