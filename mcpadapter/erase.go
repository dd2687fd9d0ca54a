package mcpadapter

import (
	"context"

	"github.com/statesidecar/state"
)

// The admin tools: tools that only an administrator may call. sidecar_reset
// is one of the 21; sidecar_erase is offered only when Options.AllowErase
// is set, after them. An authorizer (the sidecar's scopes) gives both the
// admin scope.

// AdminToolNames returns the unprefixed names of the tools that need the
// admin scope: sidecar_reset and sidecar_erase.
func AdminToolNames() []string { return []string{"sidecar_reset", "sidecar_erase"} }

// eraseResult is what sidecar_erase returns.
type eraseResult struct {
	OK            bool   `json:"ok"`
	Erased        string `json:"erased" desc:"namespace or subject"`
	Records       int64  `json:"records" desc:"the number of records deleted"`
	Events        int64  `json:"events" desc:"the number of history events deleted (namespace) or made unreadable (subject)"`
	KeysDestroyed bool   `json:"keys_destroyed" desc:"whether data keys were destroyed, which leaves every copy of the erased data (backups, replicas, history) unreadable"`
}

// eraseTool is sidecar_erase, an admin tool.
var eraseTool = tool{
	name:  "sidecar_erase",
	title: "Erase a subject or the namespace (admin)",
	desc: "ADMIN ONLY. Erase on request (GDPR Art. 17): with subject, delete every entry, session and run written for that subject (subject parameter of the writes) and destroy its data keys, " +
		"so that its history entries and every copy of its data become unreadable; without subject, erase the whole namespace (every record and history event, and its data keys), " +
		"which needs confirm_namespace equal to the namespace's name. Either way one tombstone entry in history records what was erased, by whom and when. Irreversible.",
	params: []param{
		{name: "subject", kind: kString, desc: "The subject whose data to erase. Omit to erase the whole namespace."},
		{name: "confirm_namespace", kind: kString, desc: "To erase the whole namespace: its name, as a confirmation."},
	},
	hints:  hints{destructive: true, idempotent: true},
	result: eraseResult{},
	run:    sidecarErase,
}

func sidecarErase(ctx context.Context, st *state.Store, a args, _ *Options) (any, error) {
	if a.has("subject") {
		e, err := st.EraseSubject(ctx, a.str("subject"))
		if err != nil {
			return nil, err
		}
		return eraseResult{OK: true, Erased: "subject", Records: e.Records, Events: e.Events, KeysDestroyed: e.KeysDestroyed}, nil
	}
	if a.str("confirm_namespace") != st.NamespaceName() {
		return nil, &state.FieldError{Field: "confirm_namespace", Problem: "must equal the namespace's name to erase the whole namespace; to erase one subject, pass subject"}
	}
	e, err := st.EraseNamespace(ctx)
	if err != nil {
		return nil, err
	}
	return eraseResult{OK: true, Erased: "namespace", Records: e.Records, Events: e.Events, KeysDestroyed: e.KeysDestroyed}, nil
}
