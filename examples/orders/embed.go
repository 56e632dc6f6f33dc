// Package orders is the example ontology `make run` serves: its config and
// the seed data of its two tenants.
package orders

import _ "embed"

// Config is the example's ontology config.
//
//go:embed orangerail.yaml
var Config []byte

// Seed creates and fills the example's tables. It is idempotent.
//
//go:embed seed.sql
var Seed string
