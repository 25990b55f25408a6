package commands

import (
	"errors"
	"testing"
)

func TestWithSinkErr(t *testing.T) {
	runErr, sinkErr := errors.New("run failed"), errors.New("broken pipe")
	tests := []struct {
		name          string
		run, sink     error
		want          error
		wantWrapsSink bool
	}{
		{name: "both nil"},
		{name: "run error wins", run: runErr, sink: sinkErr, want: runErr},
		{name: "sink error reported", sink: sinkErr, wantWrapsSink: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := withSinkErr(tt.run, tt.sink)
			if tt.wantWrapsSink {
				if !errors.Is(got, sinkErr) {
					t.Fatalf("got %v, want an error wrapping %v", got, sinkErr)
				}
				return
			}
			if got != tt.want {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}
