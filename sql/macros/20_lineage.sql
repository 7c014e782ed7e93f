-- Lineage macros over the edges of one graph (table macros: call them in FROM).
--
-- upstream(gid, node_id) -> graph_id, full_node_id, hops, class_name, category, session_id
--   Every ancestor of node `node_id` (a full_node_id) in graph `gid`: the nodes from which a
--   directed path of edges leads to it, each with hops = the length of the shortest such path
--   (1 = a direct input of an operation that produced node_id). The start node itself is not
--   returned. Breadth-first over a keyed recursive CTE (USING KEY): a node is added once, at its
--   first (shortest) distance, so cycles terminate.
-- downstream(gid, node_id) -> the same columns for every descendant (paths leading away from it).
-- Both are lineage(gid, node_id, toward), one walk with the edge direction chosen by toward.
-- op_subgraph(gid, op_id) -> graph_id, op_id, op_name, op_category, op_session_id, actor, role,
--   full_node_id, class_name, category, session_id, version, value
--   The operation subgraph of one operation: one row per input node (role 'input', a source of one
--   of the op's edges) and per output node (role 'output', a target), with the op's own columns
--   repeated on each row. A node that is both input and output (a self-loop) appears twice.
--
-- Examples:
--   select * from upstream('graph-1a2b', 'prediction:answer_3@1') order by hops;
--   select role, full_node_id, left(value, 80) from op_subgraph('graph-1a2b', 'op-77ee');

-- lineage(gid, node_id, toward): the one breadth-first walk behind upstream() and downstream().
-- toward = 'upstream' walks edges target -> source, anything else source -> target.
create or replace macro lineage(gid, node_id, toward) as table
with recursive
    graph_edges as materialized (
        select
            case when toward = 'upstream' then target_full_node_id else source_full_node_id end as here,
            case when toward = 'upstream' then source_full_node_id else target_full_node_id end as next
        from edges where graph_id = gid
    ),
    walk(full_node_id, hops) using key (full_node_id) as (
        select node_id::varchar, 0
        union
        select e.next, walk.hops + 1
        from walk
        join graph_edges e on e.here = walk.full_node_id
        where not exists (select 1 from recurring.walk seen where seen.full_node_id = e.next)
    )
select gid::varchar as graph_id, w.full_node_id, w.hops, n.class_name, n.category, n.session_id
from walk w
left join nodes n on n.graph_id = gid and n.full_node_id = w.full_node_id
where w.full_node_id <> node_id;

create or replace macro upstream(gid, node_id) as table
select * from lineage(gid, node_id, 'upstream');

create or replace macro downstream(gid, node_id) as table
select * from lineage(gid, node_id, 'downstream');

create or replace macro op_subgraph(gid, op_id) as table
with
    ends as (
        select 'input' as role, e.source_full_node_id as full_node_id
        from edges e where e.graph_id = gid and e.op_id = op_id
        union
        select 'output' as role, e.target_full_node_id as full_node_id
        from edges e where e.graph_id = gid and e.op_id = op_id
    ),
    op as (
        select o.op_id, o.op_name, o.category, o.session_id, o.actor
        from operations o where o.graph_id = gid and o.op_id = op_id
    )
select
    gid::varchar as graph_id,
    op.op_id,
    op.op_name,
    op.category as op_category,
    op.session_id as op_session_id,
    op.actor,
    ends.role,
    ends.full_node_id,
    n.class_name,
    n.category,
    n.session_id,
    n.version,
    n.value
from ends
cross join op
left join nodes n on n.graph_id = gid and n.full_node_id = ends.full_node_id
order by ends.role, ends.full_node_id;
