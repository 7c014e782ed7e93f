-- attribution_op_distance: how far a method's operation guess lies from the annotated faulty
-- operation in the graph's operation DAG. Its grain, columns and tests are declared in _marts.yml.
-- Operation A precedes B when a node that is the target of one of A's edges is the source of one of
-- B's edges (A <> B). A multi-agent guess names a step: its operation is the graph's operation of
-- that step. relation: exact; upstream (the guess is an ancestor of the annotated operation: blamed
-- too early; hops = shortest path from it); downstream (a descendant: blamed too late; hops =
-- shortest path to it); unrelated (in the graph, neither); not_in_graph; missing (no guess).
with recursive
    cases as (
        select
            c.method, c.system, c.graph_id, c.annotation_id, c.faulty_op_id,
            case when c.graph_kind = 'multi_agent' then o.op_id else c.predicted_op_id end as guess,
            c.predicted and (c.predicted_op_id is not null or c.predicted_step is not null) as guessed
        from attribution_cases() c
        left join operations o
          on c.graph_kind = 'multi_agent' and o.graph_id = c.graph_id and o.step = c.predicted_step
        where c.faulty_op_id is not null
    ),
    classified as (
        select
            c.*,
            exists (select 1 from operations o where o.graph_id = c.graph_id and o.op_id = c.guess) as guess_in_graph
        from cases c
    ),
    -- the walks: from each guess forward (does it reach the annotated operation?), and from each
    -- annotated operation forward (does it reach the guess?)
    starts as (
        select distinct graph_id, guess as start from classified
        where guessed and guess_in_graph and guess <> faulty_op_id
        union
        select distinct graph_id, faulty_op_id from classified
        where guessed and guess_in_graph and guess <> faulty_op_id
    ),
    op_edges as materialized (
        select distinct e1.graph_id, e1.op_id as a, e2.op_id as b
        from edges e1
        join edges e2 on e2.graph_id = e1.graph_id and e2.source_full_node_id = e1.target_full_node_id
        where e1.graph_id in (select graph_id from starts) and e1.op_id <> e2.op_id
    ),
    walk(graph_id, start, op, hops) using key (graph_id, start, op) as (
        select graph_id, start, start, 0 from starts
        union
        select w.graph_id, w.start, e.b, w.hops + 1
        from walk w
        join op_edges e on e.graph_id = w.graph_id and e.a = w.op
        where not exists (
            select 1 from recurring.walk seen
            where seen.graph_id = w.graph_id and seen.start = w.start and seen.op = e.b
        )
    ),
    related as (
        select
            c.method, c.system, c.annotation_id, c.guessed, c.guess_in_graph, c.guess = c.faulty_op_id as exact,
            up.hops as hops_up, down.hops as hops_down
        from classified c
        left join walk up on up.graph_id = c.graph_id and up.start = c.guess and up.op = c.faulty_op_id
        left join walk down on down.graph_id = c.graph_id and down.start = c.faulty_op_id and down.op = c.guess
    )
select
    method,
    system,
    case
        when not guessed then 'missing'
        when not guess_in_graph then 'not_in_graph'
        when exact then 'exact'
        when hops_up is not null then 'upstream'
        when hops_down is not null then 'downstream'
        else 'unrelated'
    end as relation,
    case
        when not guessed or not guess_in_graph or exact then null
        when hops_up is not null then hops_up
        else hops_down
    end::bigint as hops,
    count(*) as n
from related
group by all
order by method, system, relation, hops nulls first
