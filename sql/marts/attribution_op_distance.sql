-- attribution_op_distance: how far a method's operation guess lies from the annotated faulty
-- operation in the graph's operation DAG. Its grain, columns and tests are declared in _marts.yml.
-- Operation A precedes B when A feeds B (operation_links: a node that is the target of one of A's
-- edges is the source of one of B's edges, A <> B). A multi-agent guess names a step: its operation
-- is the graph's operation of that step. relation: exact; upstream (the guess is an ancestor of the
-- annotated operation: blamed too early; hops = shortest path from it); downstream (a descendant:
-- blamed too late; hops = shortest path to it); unrelated (in the graph, neither); not_in_graph;
-- missing (no guess).
--
-- Cost: the operation DAG is the mart operation_links (computed per partition, so a rebuild joins
-- the rebuilt split's edges only), read for the graphs that have a walk to make, and every walk
-- runs over it together. The walk is a plain UNION recursion over (graph, start, operation, hops):
-- a round extends only the rows the round before added, so a walk costs the rows it finds, one per
-- operation reached and path length (1.4 per operation reached on the benchmark's MemTraceBench
-- corpus; many paths of different lengths between two operations cost more). Not a keyed walk that
-- checks each new row against everything found so far: that check re-reads all walks of all graphs
-- every round, and there are as many rounds as the deepest graph is deep. hops is the least length
-- found; a walk stops at its graph's count of operation pairs, which no shortest path exceeds, so a
-- cycle ends too.
with recursive
    all_cases as materialized (select * from attribution_cases() where faulty_op_id is not null),
    steps as (  -- the operations of the multi-agent graphs a guess names a step of
        select o.graph_id, o.op_id, o.step
        from operations o
        where o.graph_id in (select graph_id from all_cases where graph_kind = 'multi_agent' and predicted_step is not null)
    ),
    cases as (
        select
            c.method, c.system, c.graph_id, c.annotation_id, c.faulty_op_id,
            case when c.graph_kind = 'multi_agent' then s.op_id else c.predicted_op_id end as guess,
            c.predicted and (c.predicted_op_id is not null or c.predicted_step is not null) as guessed
        from all_cases c
        left join steps s
          on c.graph_kind = 'multi_agent' and s.graph_id = c.graph_id and s.step = c.predicted_step
    ),
    guesses_in_graph as (  -- a semi join built on the guesses, probed by the operations
        select distinct o.graph_id, o.op_id
        from operations o
        semi join cases g on g.graph_id = o.graph_id and g.guess = o.op_id
    ),
    classified as (
        select c.*, g.op_id is not null as guess_in_graph
        from cases c
        left join guesses_in_graph g on g.graph_id = c.graph_id and g.op_id = c.guess
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
        select graph_id, from_op_id as a, to_op_id as b
        from operation_links
        where graph_id in (select graph_id from starts)
    ),
    bounds as (  -- a shortest path uses each pair (a, b) at most once
        select graph_id, count(*) as max_hops from op_edges group by graph_id
    ),
    walk(graph_id, start, op, hops, max_hops) as (
        select s.graph_id, s.start, s.start, 0, coalesce(b.max_hops, 0)
        from starts s left join bounds b using (graph_id)
        union
        select w.graph_id, w.start, e.b, w.hops + 1, w.max_hops
        from walk w
        join op_edges e on e.graph_id = w.graph_id and e.a = w.op
        where w.hops < w.max_hops
    ),
    shortest as (
        select graph_id, start, op, min(hops) as hops from walk group by graph_id, start, op
    ),
    related as (
        select
            c.method, c.system, c.annotation_id, c.guessed, c.guess_in_graph, c.guess = c.faulty_op_id as exact,
            up.hops as hops_up, down.hops as hops_down
        from classified c
        left join shortest up on up.graph_id = c.graph_id and up.start = c.guess and up.op = c.faulty_op_id
        left join shortest down on down.graph_id = c.graph_id and down.start = c.faulty_op_id and down.op = c.guess
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
