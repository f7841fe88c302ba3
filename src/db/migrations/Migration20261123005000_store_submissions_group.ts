import { Migration } from '@mikro-orm/migrations';

/** The slot count the function starts from (QUOTA_SLOTS; a test keeps them equal, as for store_submission). */
export const STORE_SUBMISSIONS_QUOTA_SLOTS = 16;

/**
 * Storing the single submissions of concurrent requests together (SubmissionWriter in
 * src/domain/submissions/group-store.ts): one call, so one round trip and one commit (one WAL
 * flush) for all of them, and the inserts done once for the lot instead of once per submission.
 * Each item is decided on its own, as store_submission decides it: whether its form is still the
 * one checked against, its claimed idempotency key still held, its fan-out complete, and whether
 * the quota counted it; only items that passed all four are stored, the others are answered and
 * their caller goes on with them alone (store_submission), so nothing here needs to undo anything.
 * The caller groups only items that cannot fail a unique key (no payment intent, no unclaimed
 * idempotency key); an error still undoes the whole call, and the caller then stores each alone.
 *
 * Items are taken by (organization, form, month): one read of the organization's quota, the form
 * and its webhooks per group, then the quota counted for all the group's eligible items at once, in
 * as few slots as hold them (each own slot first, skip locked, as store_submission: a slot is never
 * waited for here, so the call cannot deadlock with another). When the free slots hold fewer, the
 * first items (call order) are counted and the rest answered quota_ok = 0: their caller stores them
 * alone, which splits the month or waits for the slots in turn before refusing.
 *
 * Items (jsonb array, `seq` = 0, 1, … in order): seq, org, form, form_updated, month, id, data,
 * email, name, source, created, idem_key, idem_body, idem_token, event_id, event, dlv_ids, syncs:
 * the arguments of store_submission by the same names. Answers one row per item, by seq.
 */
export class Migration20261123005000_store_submissions_group extends Migration {
  override async up(): Promise<void> {
    const slots = STORE_SUBMISSIONS_QUOTA_SLOTS;
    this.addSql(`
create function store_submissions(p_items jsonb, p_plan_quotas jsonb)
returns table(seq int, form_ok int, idem_held int, listeners_ok int, webhooks int, quota_ok int)
language plpgsql volatile as $fn$
declare
  n int := jsonb_array_length(p_items);
  a_key text[];
  a_token text[];
  a_room int[];
  o_form_ok int[] := array_fill(0, array[n]);
  o_idem int[] := array_fill(1, array[n]);
  o_listeners int[] := array_fill(0, array[n]);
  o_hooks int[] := array_fill(0, array[n]);
  o_quota int[] := array_fill(0, array[n]);
  v_tokens boolean;
  v_syncs boolean;
  g record;
  i int;
  v_quota int;
  v_form_ok boolean;
  v_hooks text[];
  v_want int[];
  v_remaining int;
  v_took int;
  v_stored int := 0;
  v_stored_tokens boolean := false;
begin
  select array_agg(x.idem_key order by x.seq), array_agg(x.idem_token order by x.seq),
         array_agg(case when x.event is null then 0 else coalesce(cardinality(x.dlv_ids), 0) end order by x.seq),
         bool_or(x.idem_token is not null), bool_or(x.syncs is not null)
    into a_key, a_token, a_room, v_tokens, v_syncs
    from jsonb_to_recordset(p_items) as x(seq int, idem_key text, idem_token text, event text, dlv_ids text[], syncs jsonb);

  for g in
    select x.org, x.form, x.form_updated, x.month, array_agg(x.seq + 1 order by x.seq) as items
      from jsonb_to_recordset(p_items) as x(seq int, org text, form text, form_updated timestamptz, month text)
     group by x.org, x.form, x.form_updated, x.month
     order by x.org, x.form, x.form_updated, x.month
  loop
    select coalesce(o.monthly_quota, (p_plan_quotas ->> o.plan)::int),
           exists (select from forms f
                    where f.id = g.form and f.organization_id = g.org and f.status = 'published'
                      and f.deleted_at is null and f.updated_at = g.form_updated),
           (select array_agg(w.id order by w.id) from webhooks w
             where w.organization_id = g.org and w.enabled and (w.form_id is null or w.form_id = g.form)
               and w.events @> '["submission.created"]'::jsonb)
      into v_quota, v_form_ok, v_hooks
      from (select) one left join organizations o on o.id = g.org;

    v_want := '{}';
    foreach i in array g.items loop
      o_form_ok[i] := v_form_ok::int;
      o_hooks[i] := coalesce(cardinality(v_hooks), 0);
      o_listeners[i] := (o_hooks[i] <= a_room[i])::int;
      if v_tokens and a_token[i] is not null then
        perform from idempotency_keys k
         where k.organization_id = g.org and k.key = a_key[i] and k.claim_token = a_token[i] and k.response_status is null
           for update of k;
        o_idem[i] := found::int;
      end if;
      if v_form_ok and o_idem[i] = 1 and o_listeners[i] = 1 then
        v_want := v_want || i;
      end if;
    end loop;

    v_remaining := cardinality(v_want);
    while v_remaining > 0 loop
      -- A CTE, so evaluated once: as a subquery in FROM it may be scanned again for each slot row.
      with t as materialized (
        select s.slot, least(v_remaining, s.allowance - s.used) as take from usage_counter_slots s
         where s.organization_id = g.org and s.month = g.month
           and s.used < s.allowance and s.split_quota = v_quota
         order by (s.slot - pg_backend_pid() % ${slots} + ${slots}) % ${slots}
         limit 1
           for update of s skip locked
      )
      update usage_counter_slots u set used = u.used + t.take
        from t
       where u.organization_id = g.org and u.month = g.month and u.slot = t.slot
      returning t.take into v_took;
      exit when not found;
      v_remaining := v_remaining - v_took;
    end loop;

    for k in 1 .. cardinality(v_want) - v_remaining loop
      o_quota[v_want[k]] := 1;
      v_stored := v_stored + 1;
      v_stored_tokens := v_stored_tokens or a_token[v_want[k]] is not null;
    end loop;

    if cardinality(v_want) > v_remaining and cardinality(v_hooks) > 0 then
      insert into webhook_deliveries (id, webhook_id, organization_id, event_id, event_type, payload, status, next_attempt_at)
      select x.dlv_ids[h.n::int], h.id, g.org, x.event_id, 'form.submission.created', x.event, 'pending', now()
        from jsonb_to_recordset(p_items) as x(seq int, event_id text, event text, dlv_ids text[]),
             unnest(v_hooks) with ordinality as h(id, n)
       where o_quota[x.seq + 1] = 1 and x.seq + 1 = any(g.items)
       order by x.seq, h.n;
    end if;
  end loop;

  if v_stored > 0 then
    insert into submissions (id, organization_id, form_id, data, submitter_email, submitter_name, source, created_at)
    select x.id, x.org, x.form, x.data, x.email, x.name, x.source, x.created
      from jsonb_to_recordset(p_items) as x(seq int, id text, org text, form text, data jsonb, email text, name text,
                                            source text, created timestamptz)
     where o_quota[x.seq + 1] = 1
     order by x.seq;

    if v_stored_tokens then
      update idempotency_keys k set response_status = 201, response_body = x.idem_body, claim_token = null, lease_expires_at = null
        from jsonb_to_recordset(p_items) as x(seq int, org text, idem_key text, idem_token text, idem_body jsonb)
       where o_quota[x.seq + 1] = 1 and x.idem_token is not null and k.organization_id = x.org and k.key = x.idem_key;
    end if;

    if v_syncs then
      insert into crm_syncs (id, organization_id, form_id, submission_id, integration_index, integration_id, provider, status, next_attempt_at)
      select c->>'id', x.org, x.form, x.id, (c->>'index')::int, c->>'integrationId', c->>'provider', 'pending', now()
        from jsonb_to_recordset(p_items) as x(seq int, id text, org text, form text, syncs jsonb),
             jsonb_array_elements(x.syncs) c
       where o_quota[x.seq + 1] = 1 and x.syncs is not null
       order by x.seq;
    end if;

    -- The change rows' xid and position come from the columns' defaults, as in recordChangesSql.
    insert into submission_changes (organization_id, form_id, submission_id, type, occurred_at)
    select x.org, x.form, x.id, 'submission.created', x.created
      from jsonb_to_recordset(p_items) as x(seq int, id text, org text, form text, created timestamptz)
     where o_quota[x.seq + 1] = 1
     order by x.seq;
  end if;

  return query
    select u.i - 1, o_form_ok[u.i], o_idem[u.i], o_listeners[u.i], o_hooks[u.i], o_quota[u.i]
      from generate_series(1, n) as u(i);
end
$fn$;
`);
  }

  override async down(): Promise<void> {
    this.addSql('drop function if exists store_submissions(jsonb, jsonb);');
  }
}
