package database

import (
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

// uuidCodec is Postgres' uuid as pgx reads and writes it, and also
// google/uuid's UUID, which the store's rows and parameters are, in the
// binary format: sixteen bytes copied each way. Without it pgx takes a
// UUID through database/sql's Valuer and Scanner, which format and parse
// its text, allocating, for every approval id a statement sends or reads.
// A nullable id is a *uuid.UUID, which pgx would not look through: it
// takes a pointer whose type is a Valuer to the Valuer, which formats the
// text, fails to write it as binary (an error made with fmt), parses it
// back and writes that. Every other value and format is
// pgtype.UUIDCodec's, as before.
type uuidCodec struct{ pgtype.UUIDCodec }

func (c uuidCodec) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	if format == pgtype.BinaryFormatCode {
		switch value.(type) {
		case uuid.UUID:
			return encodeUUIDBinary{}
		case *uuid.UUID:
			return encodeUUIDPointerBinary{}
		}
	}
	return c.UUIDCodec.PlanEncode(m, oid, format, value)
}

func (c uuidCodec) PlanScan(m *pgtype.Map, oid uint32, format int16, target any) pgtype.ScanPlan {
	if _, ok := target.(*uuid.UUID); ok && format == pgtype.BinaryFormatCode {
		return scanUUIDBinary{}
	}
	return c.UUIDCodec.PlanScan(m, oid, format, target)
}

type encodeUUIDBinary struct{}

func (encodeUUIDBinary) Encode(value any, buf []byte) ([]byte, error) {
	u := value.(uuid.UUID)
	return append(buf, u[:]...), nil
}

type encodeUUIDPointerBinary struct{}

func (encodeUUIDPointerBinary) Encode(value any, buf []byte) ([]byte, error) {
	u := value.(*uuid.UUID)
	if u == nil {
		return nil, nil // NULL (pgx writes a nil pointer's NULL before it plans)
	}
	return append(buf, u[:]...), nil
}

type scanUUIDBinary struct{}

func (scanUUIDBinary) Scan(src []byte, dst any) error {
	if src == nil {
		// As uuid.UUID's own Scan, which pgx called before: NULL leaves
		// the UUID as it was. A nullable column is a *uuid.UUID, which pgx
		// sets to nil without asking this plan.
		return nil
	}
	if len(src) != len(uuid.UUID{}) {
		return fmt.Errorf("invalid length for uuid: %d", len(src))
	}
	copy(dst.(*uuid.UUID)[:], src)
	return nil
}

// RegisterUUID has m read and write google/uuid's UUID as uuidCodec does,
// as every connection of Open's pools does.
func RegisterUUID(m *pgtype.Map) {
	m.RegisterType(&pgtype.Type{Name: "uuid", OID: pgtype.UUIDOID, Codec: uuidCodec{}})
}
