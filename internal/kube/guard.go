package kube

import "context"

type writeGuardKey struct{}

// WithWriteGuard returns ctx carrying check, which the writes of this package that change the
// cluster (DeletePod, DeletePVC, SetReplicas) call first and refuse on: a run that lost its
// lock (denied, released or taken over by someone else) must not start another change, even
// in the middle of an action that makes several.
func WithWriteGuard(ctx context.Context, check func() error) context.Context {
	if check == nil {
		return ctx
	}
	return context.WithValue(ctx, writeGuardKey{}, check)
}

// CheckWriteGuard returns the error of ctx's write guard, if it carries one that refuses.
// Engines call it before a change this package does not make for them (a statement that
// changes the database, an exec that stops a process).
func CheckWriteGuard(ctx context.Context) error {
	check, _ := ctx.Value(writeGuardKey{}).(func() error)
	if check == nil {
		return nil
	}
	return check()
}
