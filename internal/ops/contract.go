package ops

// The capabilities of engine.go the generic engine has, checked at compile
// time.
var (
	_ Engine      = GenericEngine{}
	_ PodReplacer = GenericEngine{}
)
