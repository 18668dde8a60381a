//go:build tools

// The commands this module builds; the build tag keeps `go build ./...` from compiling it.
package tools

import (
	_ "github.com/grafana/loki/v3/cmd/logcli"
	_ "github.com/grafana/loki/v3/cmd/loki"
)
