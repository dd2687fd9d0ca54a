package adk_test

import (
	"errors"
	"io/fs"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/matryer/is"
	"github.com/statesidecar/state/adapters/adk"
	"github.com/statesidecar/state/internal/storetest"
	"google.golang.org/adk/v2/artifact"
	"google.golang.org/genai"
)

// The cases of ADK's own artifact service suite (internal to ADK, so
// restated here), on every backend.
func TestArtifactService(t *testing.T) {
	storetest.Run(t, func(t *testing.T, b storetest.Backend) {
		is := is.New(t)
		ctx := t.Context()
		srv := adk.NewArtifactService(storetest.Open(t, b.URL, nil), nil)
		const app, user, sess = "testapp", "testuser", "testsession"
		bytes := func(s string) *genai.Part { return genai.NewPartFromBytes([]byte(s), "text/plain") }
		for i, d := range []struct {
			file string
			want int64
			part *genai.Part
		}{
			{"file1", 1, bytes("file v1")}, {"file1", 2, bytes("file v2")}, {"file1", 3, bytes("file v3")},
			{"file2", 1, bytes("file v3")}, {"file3", 1, genai.NewPartFromText("file v1")},
			{"user:file4", 1, bytes("mine")}, {"user:file4", 2, bytes("mine too")},
		} {
			got, err := srv.Save(ctx, &artifact.SaveRequest{AppName: app, UserID: user, SessionID: sess, FileName: d.file, Part: d.part})
			is.NoErr(err)
			if got.Version != d.want {
				t.Errorf("[%d] Save(%s) = version %d, want %d", i, d.file, got.Version, d.want)
			}
		}
		load := func(sess, file string, v int64) (*genai.Part, error) {
			r, err := srv.Load(ctx, &artifact.LoadRequest{AppName: app, UserID: user, SessionID: sess, FileName: file, Version: v})
			if err != nil {
				return nil, err
			}
			return r.Part, nil
		}
		for _, tc := range []struct {
			v    int64
			want *genai.Part
		}{{0, bytes("file v3")}, {1, bytes("file v1")}, {2, bytes("file v2")}} {
			got, err := load(sess, "file1", tc.v)
			is.NoErr(err)
			is.True(cmp.Equal(got, tc.want)) // Load returns the version asked for, the newest for 0
		}
		got, err := load(sess, "file3", 0)
		is.NoErr(err)
		is.True(cmp.Equal(got, genai.NewPartFromText("file v1"))) // a text part round-trips
		got, err = load("another session", "user:file4", 0)
		is.NoErr(err)
		is.True(cmp.Equal(got, bytes("mine too"))) // "user:" files are shared by the user's sessions
		list, err := srv.List(ctx, &artifact.ListRequest{AppName: app, UserID: user, SessionID: sess})
		is.NoErr(err)
		is.Equal(list.FileNames, []string{"file1", "file2", "file3", "user:file4"})
		list, err = srv.List(ctx, &artifact.ListRequest{AppName: app, UserID: user, SessionID: "another session"})
		is.NoErr(err)
		is.Equal(list.FileNames, []string{"user:file4"}) // another session sees only the user's files
		vs, err := srv.Versions(ctx, &artifact.VersionsRequest{AppName: app, UserID: user, SessionID: sess, FileName: "file1"})
		is.NoErr(err)
		is.Equal(vs.Versions, []int64{3, 2, 1})
		gv, err := srv.GetArtifactVersion(ctx, &artifact.GetArtifactVersionRequest{AppName: app, UserID: user, SessionID: sess, FileName: "file1"})
		is.NoErr(err)
		is.Equal(gv.ArtifactVersion.Version, int64(3))
		is.Equal(gv.ArtifactVersion.MimeType, "text/plain")
		is.True(!gv.ArtifactVersion.CreateTime.IsZero())

		is.NoErr(srv.Delete(ctx, &artifact.DeleteRequest{AppName: app, UserID: user, SessionID: sess, FileName: "file1", Version: 3}))
		got, err = load(sess, "file1", 0)
		is.NoErr(err)
		is.True(cmp.Equal(got, bytes("file v2"))) // deleting the newest version makes the one before it the newest
		again, err := srv.Save(ctx, &artifact.SaveRequest{AppName: app, UserID: user, SessionID: sess, FileName: "file1", Part: bytes("file v4")})
		is.NoErr(err)
		is.Equal(again.Version, int64(4)) // a deleted version's number is not reused
		is.NoErr(srv.Delete(ctx, &artifact.DeleteRequest{AppName: app, UserID: user, SessionID: sess, FileName: "file1"}))
		_, err = load(sess, "file1", 0)
		is.True(errors.Is(err, fs.ErrNotExist)) // deleting a file deletes every version
		_, err = srv.Versions(ctx, &artifact.VersionsRequest{AppName: app, UserID: user, SessionID: sess, FileName: "file1"})
		is.True(errors.Is(err, fs.ErrNotExist))
		list, err = srv.List(ctx, &artifact.ListRequest{AppName: app, UserID: user, SessionID: sess})
		is.NoErr(err)
		is.Equal(list.FileNames, []string{"file2", "file3", "user:file4"})
		fresh, err := srv.Save(ctx, &artifact.SaveRequest{AppName: app, UserID: user, SessionID: sess, FileName: "file1", Part: bytes("new")})
		is.NoErr(err)
		is.Equal(fresh.Version, int64(1)) // a deleted file starts again at 1

		_, err = load(sess, "missing", 0)
		is.True(errors.Is(err, fs.ErrNotExist))
		_, err = load(sess, "file2", 99)
		is.True(errors.Is(err, fs.ErrNotExist))
		_, err = srv.GetArtifactVersion(ctx, &artifact.GetArtifactVersionRequest{AppName: app, UserID: user, SessionID: sess, FileName: "missing"})
		is.True(errors.Is(err, fs.ErrNotExist))
		is.NoErr(srv.Delete(ctx, &artifact.DeleteRequest{AppName: app, UserID: user, SessionID: sess, FileName: "missing"})) // deleting nothing is fine
		_, err = srv.Save(ctx, &artifact.SaveRequest{AppName: app, UserID: user, SessionID: sess, FileName: "a/b", Part: bytes("x")})
		is.True(err != nil) // ADK's request validation applies
	})
}

func TestRacingArtifactSaversGetDistinctVersions(t *testing.T) {
	storetest.Run(t, func(t *testing.T, b storetest.Backend) {
		is := is.New(t)
		ctx := t.Context()
		const savers, each = 8, 2
		start := make(chan struct{})
		var wg, midway sync.WaitGroup
		midway.Add(savers)
		var mu sync.Mutex
		var versions []int64
		var seq atomic.Int64
		starts, ends := make([]int64, savers), make([]int64, savers)
		for i := range savers {
			srv := adk.NewArtifactService(storetest.Open(t, b.URL, nil), nil) // one handle per saver, as replicas have
			wg.Go(func() {
				<-start
				starts[i] = seq.Add(1)
				for n := range each {
					if n == 1 { // every saver has saved once before any goes on
						midway.Done()
						midway.Wait()
					}
					r, err := srv.Save(ctx, &artifact.SaveRequest{AppName: "a", UserID: "u", SessionID: "s", FileName: "f",
						Part: genai.NewPartFromText("x")})
					if err != nil {
						t.Errorf("save: %v", err)
						continue
					}
					mu.Lock()
					versions = append(versions, r.Version)
					mu.Unlock()
				}
				ends[i] = seq.Add(1)
			})
		}
		close(start)
		wg.Wait()
		is.True(overlapped(starts, ends)) // the savers ran at the same time
		slices.Sort(versions)
		want := make([]int64, savers*each)
		for i := range want {
			want[i] = int64(i + 1)
		}
		is.Equal(versions, want) // every racing save got its own version, none skipped
	})
}

// overlapped reports whether two of the intervals [starts[i], ends[i]]
// overlap.
func overlapped(starts, ends []int64) bool {
	for i := range starts {
		for j := range starts {
			if i != j && starts[i] < ends[j] && starts[j] < ends[i] {
				return true
			}
		}
	}
	return false
}
