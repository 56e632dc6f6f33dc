// Package migrations holds orangerail's goose SQL migrations, embedded so the
// binary migrates its own database.
package migrations

import "embed"

// FS holds every migration file, named NNNNN_description.sql.
//
//go:embed *.sql
var FS embed.FS
