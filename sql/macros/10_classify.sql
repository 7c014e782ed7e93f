-- Classification macros shared by the failure marts (and callable from `tracehouse sql`).
-- Files in sql/macros run in name order: a table macro must exist before one that calls it,
-- hence the numeric prefixes (10_ classify, 20_ lineage, 30_ failures).
--
-- graph_kinds() -> graph_id, source, system, dataset, graph_kind
--   graph_kind = 'multi_agent' for a graph read from a multi-agent trajectory (Who&When, TracerTraj:
--   it has a session of category 'multi_agent_trajectory') or from an agent's OpenTelemetry trace
--   (otlp, otel_spans: graph_id 'otel:<trace id>'), 'memory' for every smartcomment
--   execution graph (MemTraceBench or any other export).
-- error_class(error_type) -> 'memory' | 'non_memory' | 'unlabelled'
--   the class of the label in the seed error_types (non_memory: AnnotationError, LLMAsAJudgeError,
--   which the benchmark leaves out of memory-failure studies); unlabelled = null (multi-agent
--   sources give an agent and a step, no error type); memory for a label the seed does not know.
-- operation_type(system, op_name, category) -> the cross-system operation type of an operation,
--   from sql/seeds/operation_types.csv (rows kind = 'operation'): a row matches when each of its
--   system / name / category is '*' or equal (system compared case-insensitively, name = op_name
--   exactly); the matching row with the lowest priority wins (ties: most specific row first).
-- agent_role(system, agent), agent_operation_type(system, agent) -> the role of a multi-agent
--   agent and the operation type its turns usually are, from the seed rows kind = 'agent': name is
--   an RE2 regular expression that must match the whole agent name; system '*' or equal; lowest
--   priority wins. Null when agent is null.
-- unquoted(value) -> a node value without one pair of enclosing quotes: smartcomment's default
--   encoding stores a str as its repr ('0.0'), a custom encoding as the bare text (0.0).
-- wilson_low(k, n), wilson_high(k, n) -> the 95% Wilson score interval of the proportion k/n
--   (z = 1.959964); null when n is null or 0.

create or replace macro graph_kinds() as table
select
    g.graph_id,
    g.source,
    g.system,
    g.dataset,
    case when t.graph_id is not null or g.graph_id like 'otel:%' then 'multi_agent' else 'memory' end
        as graph_kind
from graphs g
left join (select distinct graph_id from sessions where category = 'multi_agent_trajectory') t using (graph_id);

create or replace macro error_class(label) as
    case
        when label is null then 'unlabelled'
        else coalesce((select t.error_class from error_types t where t.error_type = label), 'memory')
    end;

create or replace macro operation_type(sys, op, cat) as (
    select r.operation_type
    from operation_types r
    where r.kind = 'operation'
      and (r.system = '*' or lower(r.system) = lower(sys))
      and (r.name = '*' or r.name = op)
      and (r.category = '*' or r.category = cat)
    order by
        cast(r.priority as integer),
        (r.system <> '*')::int + (r.name <> '*')::int + (r.category <> '*')::int desc,
        r.operation_type
    limit 1
);

-- agent_rule(sys, agent): the one seed row (kind 'agent') that classifies an agent, shared by the two below.
create or replace macro agent_rule(sys, agent) as table
select r.agent_role, r.operation_type
from operation_types r
where r.kind = 'agent'
  and agent is not null
  and (r.system = '*' or lower(r.system) = lower(sys))
  and regexp_full_match(agent, r.name)
order by cast(r.priority as integer), (r.system <> '*')::int desc, r.agent_role
limit 1;

create or replace macro agent_role(sys, agent) as (select nullif(agent_role, '') from agent_rule(sys, agent));

create or replace macro agent_operation_type(sys, agent) as (select operation_type from agent_rule(sys, agent));

create or replace macro unquoted(value) as
    case
        when length(value) >= 2 and left(value, 1) in ('''', '"') and right(value, 1) = left(value, 1)
            then value[2:-2]
        else value
    end;

create or replace macro wilson_low(k, n) as
    case when n > 0 then
        (k / n + 1.959963984540054 ** 2 / (2 * n)
         - 1.959963984540054 * sqrt(k / n * (1 - k / n) / n + 1.959963984540054 ** 2 / (4 * n * n)))
        / (1 + 1.959963984540054 ** 2 / n)
    end;

create or replace macro wilson_high(k, n) as
    case when n > 0 then
        (k / n + 1.959963984540054 ** 2 / (2 * n)
         + 1.959963984540054 * sqrt(k / n * (1 - k / n) / n + 1.959963984540054 ** 2 / (4 * n * n)))
        / (1 + 1.959963984540054 ** 2 / n)
    end;
