import { Migration } from '@mikro-orm/migrations';

/**
 * The slot count the function starts from (QUOTA_SLOTS in src/domain/submissions/store.ts when it
 * was written; a test keeps them equal). A change of QUOTA_SLOTS needs a migration that replaces
 * the function.
 */
export const STORE_SUBMISSION_QUOTA_SLOTS = 16;

const SIGNATURE = `store_submission(text, text, timestamptz, text, text, jsonb, text, text, text, timestamptz,
  text, text, text, jsonb, text, text, text, text[], jsonb, boolean, jsonb)`;

/**
 * Storing one submission (insertSubmission in src/domain/submissions/store.ts), as the single CTE
 * statement did it, but as plain statements behind IF branches: that statement's executor set up
 * some twenty CTEs, eight writes and their sub-selects on every call, even for the parts with
 * nothing to do (no idempotency key, payment, webhook or CRM sync: the common case), which cost
 * PostgreSQL more than running it. Here the common case runs four small statements (form, quota
 * and webhooks; the slot; the submission; its change), whose plans PL/pgSQL caches per session.
 * Still one statement for the client, so one round trip and one transaction, and any error
 * (a unique violation keeps its constraint name) undoes all of it: nothing here catches one.
 *
 * The same order as before: the claimed idempotency row is locked first, then one slot (own slot
 * skip locked, then the first free one skip locked, or, `decisive`, the first one with room in
 * ascending order, waiting). The organization's quota, the form check and the matching webhooks
 * are read in one statement, so in one snapshot, as the CTE read them; the slots' state, answered
 * only when nothing was counted, is read after the attempt (a snapshot no older than the CTE's).
 *
 * The plan quotas come in as an argument (`plan_quotas`, plan → monthly submissions, from
 * config/plans.ts of the calling process), not written in here: a release that changes
 * PLAN_LIMITS needs no migration, and each process applies its own configuration as the CTE did.
 * The event type literals ('submission.created', 'form.submission.created') are those of
 * src/domain/webhooks/event-types.ts.
 */
export class Migration20261123004000_store_submission_function extends Migration {
  override async up(): Promise<void> {
    const slots = STORE_SUBMISSION_QUOTA_SLOTS;
    this.addSql(`
create function store_submission(
  p_org text, p_form text, p_form_updated timestamptz, p_month text, p_id text,
  p_data jsonb, p_email text, p_name text, p_source text, p_created timestamptz,
  p_intent text, p_idem_key text, p_idem_hash text, p_idem_body jsonb,
  p_idem_token text, p_event_id text, p_event text, p_dlv_ids text[], p_syncs jsonb,
  p_decisive boolean, p_plan_quotas jsonb,
  out form_ok int, out idem_held int, out listeners_ok int, out webhooks int, out quota_ok int,
  out delivery_ids text[], out sync_ids text[], out slots_ready boolean, out slots_room int,
  out claimed int, out idem int)
language plpgsql volatile as $fn$
declare
  v_org_found boolean;
  v_quota int;
  v_form_ok boolean;
  v_hooks text[];
begin
  idem_held := 1;
  if p_idem_token is not null then
    perform from idempotency_keys k
     where k.organization_id = p_org and k.key = p_idem_key and k.claim_token = p_idem_token and k.response_status is null
       for update of k;
    if not found then idem_held := 0; end if;
  end if;

  select o.id is not null, coalesce(o.monthly_quota, (p_plan_quotas ->> o.plan)::int),
         exists (select from forms f
                  where f.id = p_form and f.organization_id = p_org and f.status = 'published'
                    and f.deleted_at is null and f.updated_at = p_form_updated),
         (select array_agg(w.id order by w.id) from webhooks w
           where w.organization_id = p_org and w.enabled and (w.form_id is null or w.form_id = p_form)
             and w.events @> '["submission.created"]'::jsonb)
    into v_org_found, v_quota, v_form_ok, v_hooks
    from (select) one left join organizations o on o.id = p_org;

  form_ok := v_form_ok::int;
  webhooks := coalesce(cardinality(v_hooks), 0);
  listeners_ok := (webhooks <= case when p_event is null then 0 else coalesce(cardinality(p_dlv_ids), 0) end)::int;
  quota_ok := 0;
  claimed := 0;
  idem := 0;

  if v_form_ok and idem_held = 1 and listeners_ok = 1 then
    if not p_decisive then
      update usage_counter_slots u set used = u.used + 1
       where u.organization_id = p_org and u.month = p_month and u.used < u.allowance
         and u.slot = (select s.slot from usage_counter_slots s
                        where s.organization_id = p_org and s.month = p_month and s.slot = pg_backend_pid() % ${slots}
                          and s.used < s.allowance and s.split_quota = v_quota
                          for update of s skip locked);
      if not found then
        update usage_counter_slots u set used = u.used + 1
         where u.organization_id = p_org and u.month = p_month and u.used < u.allowance
           and u.slot = (select s.slot from usage_counter_slots s
                          where s.organization_id = p_org and s.month = p_month
                            and s.used < s.allowance and s.split_quota = v_quota
                          order by (s.slot - pg_backend_pid() % ${slots} + ${slots}) % ${slots}
                          limit 1
                            for update of s skip locked);
      end if;
    else
      update usage_counter_slots u set used = u.used + 1
       where u.organization_id = p_org and u.month = p_month and u.used < u.allowance
         and u.slot = (select s.slot from usage_counter_slots s
                        where s.organization_id = p_org and s.month = p_month
                          and s.used < s.allowance and s.split_quota = v_quota
                        order by s.slot
                        limit 1
                          for update of s);
    end if;
    quota_ok := found::int;
  end if;

  if quota_ok = 0 then
    if v_org_found then
      select count(*) > 0 and coalesce(bool_and(s.split_quota is not distinct from v_quota), false),
             coalesce(sum(s.allowance - s.used) filter (where s.split_quota is not distinct from v_quota), 0)::int
        into slots_ready, slots_room
        from usage_counter_slots s where s.organization_id = p_org and s.month = p_month;
    else
      slots_ready := false;
      slots_room := 0;
    end if;
    return;
  end if;

  insert into submissions (id, organization_id, form_id, data, submitter_email, submitter_name, source, created_at)
  values (p_id, p_org, p_form, p_data, p_email, p_name, p_source, p_created);

  if p_intent is not null then
    insert into payment_claims (payment_intent_id, organization_id, submission_id) values (p_intent, p_org, p_id);
    claimed := 1;
  end if;

  if p_idem_key is not null and p_idem_token is null then
    insert into idempotency_keys (organization_id, key, request_hash, response_status, response_body)
    values (p_org, p_idem_key, p_idem_hash, 201, p_idem_body);
    idem := 1;
  end if;

  if p_idem_token is not null then
    update idempotency_keys k set response_status = 201, response_body = p_idem_body, claim_token = null, lease_expires_at = null
     where k.organization_id = p_org and k.key = p_idem_key;
  end if;

  if webhooks > 0 then
    with d as (
      insert into webhook_deliveries (id, webhook_id, organization_id, event_id, event_type, payload, status, next_attempt_at)
      select p_dlv_ids[h.n::int], h.id, p_org, p_event_id, 'form.submission.created', p_event, 'pending', now()
        from unnest(v_hooks) with ordinality as h(id, n)
       order by h.n
      returning webhook_deliveries.id
    )
    select array_agg(d.id) into delivery_ids from d;
  end if;

  if p_syncs is not null then
    with c as (
      insert into crm_syncs (id, organization_id, form_id, submission_id, integration_index, integration_id, provider, status, next_attempt_at)
      select x->>'id', p_org, p_form, p_id, (x->>'index')::int, x->>'integrationId', x->>'provider', 'pending', now()
        from jsonb_array_elements(p_syncs) x
      returning crm_syncs.id
    )
    select array_agg(c.id) into sync_ids from c;
  end if;

  -- The change row's xid and position come from the columns' defaults, as in recordChangesSql.
  insert into submission_changes (organization_id, form_id, submission_id, type, occurred_at)
  values (p_org, p_form, p_id, 'submission.created', p_created);
end
$fn$;
`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop function if exists ${SIGNATURE};`);
  }
}
