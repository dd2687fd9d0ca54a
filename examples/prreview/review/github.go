package review

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// ErrBadPRURL is wrapped by ParsePRURL's errors.
var ErrBadPRURL = errors.New("not a GitHub pull-request URL")

// ErrOffline is wrapped when GitHub cannot be reached at all.
var ErrOffline = errors.New("GitHub cannot be reached")

var (
	ghName = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$`)
	ghRepo = regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`)
)

// A PRRef names a pull request on GitHub.
type PRRef struct {
	Owner, Repo string
	Number      int
}

// ParsePRURL reads https://github.com/OWNER/REPO/pull/NUMBER (anything
// after the number, such as /files, is ignored). The error says what is
// wrong and wraps ErrBadPRURL.
func ParsePRURL(raw string) (PRRef, error) {
	raw = strings.TrimSpace(raw)
	bad := func(why string) (PRRef, error) {
		return PRRef{}, fmt.Errorf("%w: %s (expected https://github.com/OWNER/REPO/pull/NUMBER)", ErrBadPRURL, why)
	}
	if raw == "" {
		return bad("the URL is empty")
	}
	if !strings.Contains(raw, "/") {
		return bad(fmt.Sprintf("%q is neither a URL nor the id of a bundled PR", raw))
	}
	full := raw
	if !strings.Contains(raw, "://") {
		full = "https://" + raw
	}
	u, err := url.Parse(full)
	if err != nil {
		return bad(fmt.Sprintf("%q does not parse as a URL", raw))
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return bad(fmt.Sprintf("the scheme is %q", u.Scheme))
	}
	if h := strings.ToLower(u.Hostname()); h != "github.com" && h != "www.github.com" {
		return bad(fmt.Sprintf("the host is %q, not github.com", u.Hostname()))
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	if len(parts) < 4 || parts[2] != "pull" {
		return bad(fmt.Sprintf("the path %q is not /OWNER/REPO/pull/NUMBER", u.Path))
	}
	if !ghName.MatchString(parts[0]) || !ghRepo.MatchString(parts[1]) {
		return bad(fmt.Sprintf("%q is not a valid OWNER/REPO", parts[0]+"/"+parts[1]))
	}
	n, err := strconv.Atoi(parts[3])
	if err != nil || n <= 0 {
		return bad(fmt.Sprintf("the pull-request number %q is not a positive number", parts[3]))
	}
	return PRRef{Owner: parts[0], Repo: parts[1], Number: n}, nil
}

// A GitHub fetches pull requests from the GitHub REST API.
type GitHub struct {
	// API is the API's base URL; empty means https://api.github.com.
	API string
	// Token, if set, is sent as a bearer token (higher rate limits,
	// private repositories).
	Token string
	// Client is the HTTP client; nil means one with a 20 s timeout.
	Client *http.Client
}

// Fetch returns the pull request's metadata and diff. Its errors say what
// to do: ErrOffline when GitHub cannot be reached at all.
func (g GitHub) Fetch(ctx context.Context, ref PRRef) (PR, error) {
	var meta struct {
		Title   string `json:"title"`
		HTMLURL string `json:"html_url"`
		Body    string `json:"body"`
		User    struct {
			Login string `json:"login"`
		} `json:"user"`
		Head struct {
			Ref string `json:"ref"`
		} `json:"head"`
		Base struct {
			Ref string `json:"ref"`
		} `json:"base"`
	}
	b, err := g.get(ctx, ref, "application/vnd.github+json")
	if err != nil {
		return PR{}, err
	}
	if err := json.Unmarshal(b, &meta); err != nil || meta.Title == "" {
		return PR{}, fmt.Errorf("GitHub answered for %s/%s#%d with something that is not a pull request", ref.Owner, ref.Repo, ref.Number)
	}
	diff, err := g.get(ctx, ref, "application/vnd.github.diff")
	if err != nil {
		return PR{}, err
	}
	p := PR{Title: meta.Title, Author: meta.User.Login, Branch: meta.Head.Ref, Base: meta.Base.Ref,
		Repo: ref.Owner + "/" + ref.Repo, Number: ref.Number, Body: meta.Body, URL: meta.HTMLURL,
		Source: "github", Diff: string(diff)}
	if _, err := p.Files(); err != nil {
		return PR{}, fmt.Errorf("the diff of %s cannot be read: %w", p.Ref(), err)
	}
	return p, nil
}

// get reads one representation of the pull request.
func (g GitHub) get(ctx context.Context, ref PRRef, accept string) ([]byte, error) {
	api := strings.TrimRight(g.API, "/")
	if api == "" {
		api = "https://api.github.com"
	}
	u := fmt.Sprintf("%s/repos/%s/%s/pulls/%d", api, url.PathEscape(ref.Owner), url.PathEscape(ref.Repo), ref.Number)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	req.Header.Set("User-Agent", "state-prreview-demo")
	if g.Token != "" {
		req.Header.Set("Authorization", "Bearer "+g.Token)
	}
	c := g.Client
	if c == nil {
		c = &http.Client{Timeout: 20 * time.Second}
	}
	res, err := c.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w (%s): only the bundled pull requests are available offline", ErrOffline, netReason(err))
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, MaxDiffBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w (reading the answer: %v)", ErrOffline, err)
	}
	name := fmt.Sprintf("%s/%s#%d", ref.Owner, ref.Repo, ref.Number)
	switch {
	case res.StatusCode == http.StatusNotFound:
		return nil, fmt.Errorf("GitHub has no public pull request %s (404): check the URL, or set a token for a private repository", name)
	case res.StatusCode == http.StatusUnauthorized:
		return nil, fmt.Errorf("GitHub refused the token (401): check GITHUB_TOKEN")
	case res.StatusCode == http.StatusForbidden || res.StatusCode == http.StatusTooManyRequests:
		return nil, fmt.Errorf("GitHub refused the request (%d, probably its rate limit): set GITHUB_TOKEN, or load a bundled pull request", res.StatusCode)
	case res.StatusCode == http.StatusNotAcceptable && accept != "application/vnd.github+json":
		return nil, fmt.Errorf("the diff of %s is too large for GitHub to render", name)
	case res.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("GitHub answered %s for %s", res.Status, name)
	case len(body) > MaxDiffBytes:
		return nil, fmt.Errorf("%s is too large for the demo (more than %d KiB): pick a smaller pull request", name, MaxDiffBytes>>10)
	}
	return body, nil
}

// netReason is the short cause of a transport error, without addresses.
func netReason(err error) string {
	s := err.Error()
	for _, known := range []string{"no such host", "connection refused", "network is unreachable",
		"i/o timeout", "Client.Timeout exceeded", "server misbehaving", "no route to host", "connection reset"} {
		if strings.Contains(s, known) {
			return known
		}
	}
	return "network error"
}
