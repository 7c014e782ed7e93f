-- The one way agent names and error labels are compared (every mart, chart and drill-down uses these).
-- Sources spell the same agent and the same label differently (AgentRx labels the tau-bench agent
-- `Assistant` where the messages' role is `assistant`, and writes `Websurfer` beside `WebSurfer`;
-- it spells one category `Intent not supported` and `Intent Not Supported`): the tables keep what the
-- source wrote, and these macros say when two spellings name the same thing.
--
-- agent_key(name) -> the agent name lower-cased, without surrounding white space; NULL for NULL or a
--   blank name (a blank name names no agent).
-- same_agent(a, b) -> a and b name the same agent: agent_key(a) = agent_key(b); NULL when either
--   names none (an unknown agent is neither the same nor another).
-- label_key(label) -> the label lower-cased with everything but ASCII letters and digits removed.
-- error_label(taxonomy, label) -> the canonical spelling of a failure label: the canonical_label of
--   the taxonomy_crosswalk row of the taxonomy whose label is written the same, else whose label_key
--   is the same (so an unseen spelling such as `intent  not-SUPPORTED` folds too); a label the
--   crosswalk does not know stays as written. NULL for NULL.

create or replace macro agent_key(name) as nullif(lower(regexp_replace(name, '^\s+|\s+$', '', 'g')), '');

create or replace macro same_agent(a, b) as agent_key(a) = agent_key(b);

create or replace macro label_key(label) as regexp_replace(lower(label), '[^a-z0-9]', '', 'g');

create or replace macro error_label(tax, label) as (
    case
        when label is null then null
        else coalesce(
            (select min(c.canonical_label) from taxonomy_crosswalk c where c.taxonomy = tax and c.label = label),
            (select min(c.canonical_label) from taxonomy_crosswalk c
             where c.taxonomy = tax and label_key(c.label) = label_key(label) and label_key(label) <> ''),
            label
        )
    end
);
