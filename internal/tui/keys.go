package tui

import "github.com/charmbracelet/bubbles/key"

// keyMap is built per model (no package-level state) and satisfies
// help.KeyMap.
type keyMap struct {
	// Abort asks the operation to stop at a safe point.
	Abort key.Binding
	// Force quits the view without waiting; enabled once aborting.
	Force key.Binding
}

func newKeyMap() keyMap {
	k := keyMap{
		Abort: key.NewBinding(
			key.WithKeys("q", "ctrl+c"),
			key.WithHelp("q/ctrl+c", "abort safely"),
		),
		Force: key.NewBinding(
			key.WithKeys("ctrl+c"),
			key.WithHelp("ctrl+c", "force quit (may leave the current action unverified)"),
		),
	}
	k.Force.SetEnabled(false)
	return k
}

// aborting switches the bindings once an abort is under way: another q
// would be a no-op, only a force quit is left.
func (k *keyMap) aborting() {
	k.Abort.SetEnabled(false)
	k.Force.SetEnabled(true)
}

// ShortHelp implements help.KeyMap; disabled bindings are hidden by help.
func (k keyMap) ShortHelp() []key.Binding {
	return []key.Binding{k.Abort, k.Force}
}

// FullHelp implements help.KeyMap.
func (k keyMap) FullHelp() [][]key.Binding {
	return [][]key.Binding{k.ShortHelp()}
}
