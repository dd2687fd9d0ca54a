package review_test

import (
	"fmt"

	"github.com/statesidecar/state/examples/prreview/review"
)

// A reviewer looks at the added lines of each file of a diff.
func ExampleReviewFile() {
	files, err := review.ParseDiff(`diff --git a/app/db.py b/app/db.py
--- a/app/db.py
+++ b/app/db.py
@@ -1,2 +1,5 @@
 def names(cur, ids):
+    out = []
+    for i in ids:
+        cur.execute(f"SELECT name FROM users WHERE id = {i}")
     return out
`)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, kind := range review.Kinds {
		findings, _ := review.ReviewFile(kind, files[0])
		for _, f := range findings {
			fmt.Println(kind, f.Rule, f.Line)
		}
	}
	// Output:
	// security sql-string-building 4
	// performance query-in-loop 4
}

// Only github.com pull-request URLs are accepted; the error says why not.
func ExampleParsePRURL() {
	ref, err := review.ParsePRURL("https://github.com/modelcontextprotocol/go-sdk/pull/12/files")
	fmt.Println(ref, err)
	_, err = review.ParsePRURL("https://github.com/modelcontextprotocol/go-sdk/issues/12")
	fmt.Println(err)
	// Output:
	// {modelcontextprotocol go-sdk 12} <nil>
	// not a GitHub pull-request URL: the path "/modelcontextprotocol/go-sdk/issues/12" is not /OWNER/REPO/pull/NUMBER (expected https://github.com/OWNER/REPO/pull/NUMBER)
}
