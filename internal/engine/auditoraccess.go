package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/store"
)

// AuditorMember is the member of the result of a record of an auditor
// (auditor_granted, auditor_revoked, auditor_password_set) that names the
// auditor login.
const AuditorMember = "auditor"

// RecordAuditorAccess appends to the tenant's chain the operator's record
// of the login auditor given (granted) or losing read access to the
// tenant: its phase auditor_granted or auditor_revoked, its actor the
// operator, the login tx acts as, and its result {"auditor": NAME}. tx is
// the transaction, scoped to the tenant, that changes the grant, so the
// record stands exactly when the change does; every verifier lists it
// among the operators' records.
//
// tx must act as the owner of the orangerail schema, or a superuser, as
// itself, as for a break-glass decision: anything else is refused
// X_BREAK_GLASS_REFUSED (and the database refuses an operator's record
// from any other login, ORA06).
func RecordAuditorAccess(ctx context.Context, tx pgx.Tx, tenant, auditor string, granted bool, now time.Time) error {
	phase := PhaseAuditorRevoked
	if granted {
		phase = PhaseAuditorGranted
	}
	return recordAuditor(ctx, tx, tenant, auditor, phase, now)
}

// RecordAuditorPasswordSet appends to the tenant's chain the operator's
// record of the auditor login's password set: phase auditor_password_set,
// its result {"auditor": NAME}, as RecordAuditorAccess appends, in the
// transaction that sets it. A login's password is the cluster's, so the
// caller records it in every tenant the login reads.
func RecordAuditorPasswordSet(ctx context.Context, tx pgx.Tx, tenant, auditor string, now time.Time) error {
	return recordAuditor(ctx, tx, tenant, auditor, PhaseAuditorPasswordSet, now)
}

// recordAuditor appends the owner's record of phase about the auditor
// login to the tenant's chain, tx acting as the owner.
func recordAuditor(ctx context.Context, tx pgx.Tx, tenant, auditor string, phase Phase, now time.Time) error {
	login, err := store.New(tx).SessionOperatorGet(ctx)
	if err != nil {
		return err
	}
	if !login.OwnRights || !login.Owner {
		return errcode.New(errcode.BreakGlassRefused, fmt.Sprintf("the login %q is not the owner of the orangerail schema acting as itself", login.Login), nil)
	}
	result, err := json.Marshal(map[string]string{AuditorMember: auditor})
	if err != nil {
		return err
	}
	return appendAudit(ctx, tx, &Record{Tenant: tenant, At: now.UTC(), CorrelationID: uuid.NewString(), Phase: phase,
		Actor: Actor{Kind: ActorOperator, Subject: login.Login}, Result: result})
}
