package ops

import (
	"context"
	"time"
)

// OperatorControl is an engine capability: the engine's clusters may be reconciled by an
// operator (a custom resource it watches) that this tool can pause, whose instances it can
// deny, and which may hold a lock of its own inside the database that a killed run of this tool
// leaves behind. The lock, deny and list commands render what it returns and name no engine.
// Every method is for a cluster that OperatorResource says has such a resource.
type OperatorControl interface {
	// OperatorResource names the operator's resource of the cluster; nil when it has none (the
	// engine's other layouts).
	OperatorResource(c *Cluster) *ObjectRef
	// OperatorLocks reads what the operator's resource says of locking and pausing, and with
	// readDB the operator's lock as the database holds it (a failed read is reported in
	// DBLockError, not returned).
	OperatorLocks(ctx context.Context, c *Cluster, readDB bool, now time.Time) *OperatorLocks
	// SetOperatorPaused pauses (with who and until when, recorded on the resource) or resumes
	// the operator, in one conflict-checked write; changed is false when it already was so.
	SetOperatorPaused(ctx context.Context, c *Cluster, paused bool, by string, until time.Time) (changed bool, err error)
	// SetOperatorInstanceDenied denies (or, with allow, allows) an operator instance by ID in
	// the resource's deny list, in one conflict-checked write; changed as above. Entry is the
	// entry as written, for messages.
	SetOperatorInstanceDenied(ctx context.Context, c *Cluster, id string, allow bool) (changed bool, entry string, err error)
	// ClearOwnOperatorLock clears the operator's lock in the database when this tool holds it
	// (a run killed outright left it); nil when there was nothing of ours to clear.
	ClearOwnOperatorLock(ctx context.Context, c *Cluster) (*OperatorLockHolder, error)
	// OperatorLockOwner is the owner name this tool's runs hold the operator's lock as.
	OperatorLockOwner() string
}

// OperatorLocks is what an operator's resource (and the database) say of its locking.
type OperatorLocks struct {
	Resource ObjectRef
	// Operator names the operator for people ("FoundationDB operator").
	Operator string
	// DocumentField is the field of the lock status and deny list documents that holds these
	// (for -o json/yaml), and DBLockField the field within it for the database's lock.
	DocumentField, DBLockField string
	// DBName names the database in text output ("FDB": "FDB lock key").
	DBName string
	// PauseField names the resource's setting that pauses the operator ("spec.skip").
	PauseField string
	// DenyList is the resource's list of denied (or explicitly allowed) operator instances.
	DenyList []OperatorDenyEntry
	// DenyListField and StatusLocksField name the fields shown, as the resource spells them.
	DenyListField, StatusLocksField string
	// StatusLocks is what the operator reports of the deny list it applied.
	StatusLocks []string
	// Paused is set when the operator is paused: what the pause is and how to end it.
	Paused *OperatorPause
	// DBLock is the operator's lock in the database; nil when the cluster does not use it or it
	// was not read. DBLockError says why it could not be read.
	DBLock      *OperatorDBLock
	DBLockError string
}

// OperatorDenyEntry is one entry of an operator's deny list.
type OperatorDenyEntry struct {
	ID    string
	Allow bool
}

// OperatorPause is an operator's pause, described for people.
type OperatorPause struct {
	Description string
	// Resume is the exact command that ends it.
	Resume string
}

// OperatorDBLock is the operator's lock as the database holds it. Key, Raw and the deny keys
// are printable already (the database's own escaping).
type OperatorDBLock struct {
	Key    string
	Holder *OperatorLockHolder
	// Raw is the key's value when it is not a lock the operator wrote (Holder nil).
	Raw      string
	DenyKeys []string
}

// OperatorLockHolder holds an operator's lock from Start until End.
type OperatorLockHolder struct {
	Owner      string
	Start, End time.Time
}

// Expired: the holder's time ended before now (whole seconds, as the lock stores it), so anyone may take the lock.
func (h OperatorLockHolder) Expired(now time.Time) bool { return h.End.Unix() < now.Unix() }
