package adk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/statesidecar/state"
	"google.golang.org/adk/v2/artifact"
	"google.golang.org/genai"
)

// ArtifactService is an artifact.Service over a state.Store: versioned
// blobs per app, user, session and file name. A file name starting with
// "user:" is shared by every session of the user, as in ADK's own services.
//
// Each version is one entry holding the genai.Part as JSON, so an
// artifact's size is bounded by the store's Limits.MaxValueBytes (1 MiB of
// JSON by default, about 750 KiB of binary data once base64-encoded):
// raise the limit for larger artifacts, or keep them in an object store and
// save a reference. Versions count up from 1 and are never reused for a
// file, even after the newest version is deleted, until the whole file is
// deleted.
//
// Keys, under the prefix (default "adk/"), with every name path-escaped:
//
//	art/h/<app>/<user>/<scope>/<file>        the newest version number ever assigned
//	art/v/<app>/<user>/<scope>/<file>/<n>    version n (20 digits)
//
// where <scope> is "s/<session>" or, for "user:" files, "u".
type ArtifactService struct {
	st     *state.Store
	prefix string
	agent  string
}

var _ artifact.Service = (*ArtifactService)(nil)

// NewArtifactService returns an artifact service over st; opts may be nil.
func NewArtifactService(st *state.Store, opts *Options) *ArtifactService {
	return &ArtifactService{st: st, prefix: opts.prefix(), agent: opts.agent()}
}

// storedArtifact is the value of a version's entry.
type storedArtifact struct {
	Part    *genai.Part `json:"part"`
	Created time.Time   `json:"created"`
}

func (s *ArtifactService) scope(app, user, sess, file string) string {
	sc := "s/" + esc(sess)
	if strings.HasPrefix(file, "user:") {
		sc = "u"
	}
	return esc(app) + "/" + esc(user) + "/" + sc
}

func (s *ArtifactService) headKey(app, user, sess, file string) string {
	return s.prefix + "art/h/" + s.scope(app, user, sess, file) + "/" + esc(file)
}

func (s *ArtifactService) versionPrefix(app, user, sess, file string) string {
	return s.prefix + "art/v/" + s.scope(app, user, sess, file) + "/" + esc(file) + "/"
}

func (s *ArtifactService) versionKey(app, user, sess, file string, v int64) string {
	return fmt.Sprintf("%s%020d", s.versionPrefix(app, user, sess, file), v)
}

// Save stores a new version of an artifact (or, with req.Version set, that
// version) and returns its number. The version and the file's counter are
// written in one atomic commit, so racing savers get distinct versions.
func (s *ArtifactService) Save(ctx context.Context, req *artifact.SaveRequest) (*artifact.SaveResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("adk: save artifact: %w", err)
	}
	if req.Version < 0 {
		return nil, fmt.Errorf("adk: save artifact: version must not be negative, got %d", req.Version)
	}
	head := s.headKey(req.AppName, req.UserID, req.SessionID, req.FileName)
	var v int64
	_, err := s.st.Update(ctx, []string{head}, func(cur []state.Entry) ([]state.Write, error) {
		var n int64
		if cur[0].Found() {
			if err := cur[0].Decode(&n); err != nil {
				return nil, fmt.Errorf("decoding %s: %w", head, err)
			}
		}
		v = req.Version
		if v == 0 {
			v = n + 1
		}
		return []state.Write{
			{Key: head, Value: max(n, v), AgentID: s.agent},
			{Key: s.versionKey(req.AppName, req.UserID, req.SessionID, req.FileName, v),
				Value: storedArtifact{Part: req.Part, Created: time.Now().UTC()}, AgentID: s.agent},
		}, nil
	})
	if err != nil {
		return nil, fmt.Errorf("adk: save artifact %q: %w", req.FileName, err)
	}
	return &artifact.SaveResponse{Version: v}, nil
}

// find returns a version of an artifact: version v, or the newest when v
// is 0. A missing one is an error matching fs.ErrNotExist.
func (s *ArtifactService) find(ctx context.Context, app, user, sess, file string, v int64) (int64, storedArtifact, error) {
	var sa storedArtifact
	if v > 0 {
		e, err := s.st.Get(ctx, s.versionKey(app, user, sess, file, v))
		if err != nil {
			return 0, sa, notExist(err)
		}
		return v, sa, json.Unmarshal(e.Value, &sa)
	}
	he, err := s.st.Get(ctx, s.headKey(app, user, sess, file))
	if err != nil {
		return 0, sa, notExist(err)
	}
	var n int64
	if err := he.Decode(&n); err != nil {
		return 0, sa, err
	}
	// The newest version is normally the counter's; after deletions, look
	// further back, a batch at a time.
	const batch = 16
	for hi := n; hi >= 1; hi -= batch {
		var keys []string
		for i := hi; i >= max(hi-batch+1, 1); i-- {
			keys = append(keys, s.versionKey(app, user, sess, file, i))
		}
		es, err := s.st.GetMany(ctx, keys)
		if err != nil {
			return 0, sa, err
		}
		for i, e := range es {
			if e.Found() {
				return hi - int64(i), sa, json.Unmarshal(e.Value, &sa)
			}
		}
	}
	return 0, sa, fmt.Errorf("artifact not found: %w", fs.ErrNotExist)
}

// notExist turns the store's not-found into fs.ErrNotExist, ADK's sentinel.
func notExist(err error) error {
	if errors.Is(err, state.ErrNotFound) {
		return fmt.Errorf("artifact not found: %w", fs.ErrNotExist)
	}
	return err
}

// Load returns a version of an artifact, the newest when req.Version is 0.
// A missing one is an error matching fs.ErrNotExist.
func (s *ArtifactService) Load(ctx context.Context, req *artifact.LoadRequest) (*artifact.LoadResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("adk: load artifact: %w", err)
	}
	_, sa, err := s.find(ctx, req.AppName, req.UserID, req.SessionID, req.FileName, req.Version)
	if err != nil {
		return nil, fmt.Errorf("adk: load artifact %q: %w", req.FileName, err)
	}
	return &artifact.LoadResponse{Part: sa.Part}, nil
}

// GetArtifactVersion returns the metadata of a version of an artifact, the
// newest when req.Version is 0.
func (s *ArtifactService) GetArtifactVersion(ctx context.Context, req *artifact.GetArtifactVersionRequest) (*artifact.GetArtifactVersionResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("adk: get artifact version: %w", err)
	}
	v, sa, err := s.find(ctx, req.AppName, req.UserID, req.SessionID, req.FileName, req.Version)
	if err != nil {
		return nil, fmt.Errorf("adk: get artifact version %q: %w", req.FileName, err)
	}
	mime := "text/plain"
	if sa.Part != nil && sa.Part.InlineData != nil {
		mime = sa.Part.InlineData.MIMEType
	}
	return &artifact.GetArtifactVersionResponse{ArtifactVersion: &artifact.ArtifactVersion{
		Version: v, MimeType: mime, CreateTime: sa.Created}}, nil
}

// Versions lists the versions of an artifact, newest first. An artifact
// without any is an error matching fs.ErrNotExist.
func (s *ArtifactService) Versions(ctx context.Context, req *artifact.VersionsRequest) (*artifact.VersionsResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("adk: list artifact versions: %w", err)
	}
	prefix := s.versionPrefix(req.AppName, req.UserID, req.SessionID, req.FileName)
	var vs []int64
	err := eachKey(ctx, s.st, prefix, func(k string) error {
		v, err := strconv.ParseInt(strings.TrimPrefix(k, prefix), 10, 64)
		vs = append(vs, v)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("adk: list artifact versions %q: %w", req.FileName, err)
	}
	if len(vs) == 0 {
		return nil, fmt.Errorf("adk: list artifact versions %q: artifact not found: %w", req.FileName, fs.ErrNotExist)
	}
	slices.Reverse(vs)
	return &artifact.VersionsResponse{Versions: vs}, nil
}

// List lists the file names of a session's artifacts and of the user's
// "user:" artifacts, sorted.
func (s *ArtifactService) List(ctx context.Context, req *artifact.ListRequest) (*artifact.ListResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("adk: list artifacts: %w", err)
	}
	names := map[string]bool{}
	for _, file := range []string{"", "user:"} {
		prefix := s.prefix + "art/v/" + s.scope(req.AppName, req.UserID, req.SessionID, file) + "/"
		err := eachKey(ctx, s.st, prefix, func(k string) error {
			f, _, _ := strings.Cut(strings.TrimPrefix(k, prefix), "/")
			name, err := url.PathUnescape(f)
			names[name] = true
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("adk: list artifacts: %w", err)
		}
	}
	out := make([]string, 0, len(names))
	for n := range names {
		out = append(out, n)
	}
	slices.Sort(out)
	return &artifact.ListResponse{FileNames: out}, nil
}

// Delete deletes one version of an artifact, or with req.Version 0 all of
// them. Deleting a missing artifact is not an error.
func (s *ArtifactService) Delete(ctx context.Context, req *artifact.DeleteRequest) error {
	if err := req.Validate(); err != nil {
		return fmt.Errorf("adk: delete artifact: %w", err)
	}
	if req.Version > 0 {
		key := s.versionKey(req.AppName, req.UserID, req.SessionID, req.FileName, req.Version)
		if _, err := s.st.Delete(ctx, key); err != nil {
			return fmt.Errorf("adk: delete artifact %q: %w", req.FileName, err)
		}
		return nil
	}
	if err := deletePrefix(ctx, s.st, s.versionPrefix(req.AppName, req.UserID, req.SessionID, req.FileName), s.agent); err != nil {
		return fmt.Errorf("adk: delete artifact %q: %w", req.FileName, err)
	}
	if _, err := s.st.Delete(ctx, s.headKey(req.AppName, req.UserID, req.SessionID, req.FileName)); err != nil {
		return fmt.Errorf("adk: delete artifact %q: %w", req.FileName, err)
	}
	return nil
}

// eachKey calls f with every key under prefix, in order.
func eachKey(ctx context.Context, st *state.Store, prefix string, f func(string) error) error {
	cursor := ""
	for {
		page, err := st.List(ctx, prefix, state.WithLimit(listPage), state.WithCursor(cursor))
		if err != nil {
			return err
		}
		for _, k := range page.Keys {
			if err := f(k); err != nil {
				return err
			}
		}
		if page.NextCursor == "" {
			return nil
		}
		cursor = page.NextCursor
	}
}
