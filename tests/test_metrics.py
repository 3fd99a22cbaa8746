"""Each metric on hand-built traces with hand-computed answers, including the edge cases."""

from __future__ import annotations

import math

import pytest

from benchmark.env.trace import TRACE_FORMAT, atom_record
from benchmark.metrics.episode import (
    add_reference_metrics,
    balance,
    episode_metrics,
    gini,
    run_metrics,
    specialisation,
    workload_entropy,
)
from benchmark.metrics.specs import metric
from benchmark.tasks.goals import Atom


def trace(
    n: int = 2,
    satisfied=(True, True),
    success=None,
    ticks: int = 10,
    skills=(),
    atoms=(),
    messages=(),
    rows=(),
    checklist=None,
) -> dict:
    atoms_of = checklist or [
        Atom("inside", f"Apple|{k}|0|0", "Fridge", True) for k in range(len(satisfied))
    ]
    return {
        "format": TRACE_FORMAT,
        "config": {"n_agents": n},
        "checklist": [atom_record(a) for a in atoms_of],
        "skills": [
            {
                "tick": t,
                "agent": a,
                "skill": s,
                "target": tg,
                "accepted": acc,
                "end": t,
                "success": ok,
            }
            for t, a, s, tg, acc, ok in skills
        ],
        "atoms": [{"tick": t, "agent": a, "atom": i, "satisfied": v} for t, a, i, v in atoms],
        "messages": [
            {"tick": t, "sender": s, "recipients": list(r), "tokens": tok, "delivered": d}
            for t, s, r, tok, d in messages
        ],
        "ticks": list(rows),
        "final": {
            "satisfied": list(satisfied),
            "success": all(satisfied) if success is None else success,
            "ticks": ticks,
        },
    }


A0, A1 = "Apple|0|0|0", "Apple|1|0|0"


def test_a_two_agent_episode_where_each_did_one_atom() -> None:
    t = trace(
        skills=[
            (0, "agent_0", "pickup", A0, True, True),
            (0, "agent_1", "pickup", A1, True, True),
            (2, "agent_0", "put", "Fridge|9|9|9", True, True),
            (2, "agent_1", "wait", None, True, True),
            (3, "agent_1", "put", "Fridge|9|9|9", True, False),
        ],
        atoms=[(2, "agent_0", 0, True), (5, "agent_1", 1, True)],
    )
    m = episode_metrics(t)
    assert m["SR"] == 1.0 and m["TR"] == 1.0 and m["C"] == 1.0
    assert m["credited"] == [1, 1]
    assert m["B"] == pytest.approx(1 / 1.0001)
    assert m["workload_entropy"] == pytest.approx(1.0) and m["workload_gini"] == 0.0
    assert m["L"] == 10 and m["L_decisions"] == 5
    assert m["wasted_action_rate"] == pytest.approx(2 / 5)  # one wait, one failed put
    assert m["redundancy"] == 0.0


def test_an_idle_agent_counts_in_balance_and_workload() -> None:
    t = trace(n=3, atoms=[(1, "agent_0", 0, True), (2, "agent_1", 1, True)])
    m = episode_metrics(t)
    assert m["credited"] == [1, 1, 0]
    assert m["B"] == 0.0
    assert m["workload_entropy"] == pytest.approx(math.log(2) / math.log(3))
    assert m["workload_gini"] == pytest.approx(4 / (2 * 3 * 2))  # sum of |s_i - s_j| over 2 n sum s


def test_a_single_agent_has_balance_one_and_no_entropy() -> None:
    t = trace(n=1, atoms=[(1, "agent_0", 0, True), (2, "agent_0", 1, True)])
    m = episode_metrics(t)
    assert m["B"] == pytest.approx(2 / 2.0001)
    assert m["workload_entropy"] is None and m["workload_gini"] == 0.0


def test_partial_success_undone_atoms_and_failed_interactions() -> None:
    t = trace(
        satisfied=(True, False),
        skills=[
            (0, "agent_0", "pickup", A0, True, True),
            (0, "agent_1", "pickup", A1, True, False),
            (1, "agent_1", "pickup", A0, True, False),
        ],
        atoms=[
            (1, "agent_1", 0, True),
            (2, "agent_1", 0, False),
            (3, "agent_0", 0, True),
            (4, "agent_1", 1, True),
            (5, "agent_1", 1, False),
        ],
    )
    m = episode_metrics(t)
    assert m["SR"] == 0.0 and m["TR"] == 0.5
    assert m["credited"] == [1, 0]  # atom 0 last made true by agent_0; atom 1 undone
    assert m["C"] == 0.5  # the failed pickup of Apple|1 does not count
    assert m["redundancy"] == 0.5  # both agents went for Apple|0


def test_nothing_credited_gives_zero_balance_and_undefined_workload() -> None:
    m = episode_metrics(trace(satisfied=(False, False)))
    assert m["B"] == 0.0 and m["workload_entropy"] is None and m["workload_gini"] is None
    assert m["wasted_action_rate"] == 0.0 and m["L_decisions"] == 0


def test_type_level_atoms_match_created_objects() -> None:
    t = trace(
        satisfied=(True,),
        checklist=[Atom("isCooked", "BreadSliced", None, True, at_least=1)],
        skills=[(0, "agent_0", "pickup", "Bread|1|2|3|BreadSliced_0", True, True)],
        atoms=[(3, "agent_0", 0, True)],
    )
    assert episode_metrics(t)["C"] == 1.0


def test_interference_counts_blocked_ticks_and_failed_moves() -> None:
    rows = [
        [["Teleport", True, "navigate", False], ["Teleport", False, "navigate", True]],
        [[None, None, "navigate", True], ["Teleport", True, "navigate", False]],
        [["PickupObject", False, "pickup", False], [None, None, "wait", False]],
        [["Teleport", False, "explore", True], ["Teleport", False, "navigate", True]],
    ]
    m = episode_metrics(trace(rows=rows))
    assert m["blocked_ticks"] == 4 and m["collisions"] == 3  # a failed explore move counts too


def test_a_held_back_step_aside_is_a_collision_and_primitive_bumps_count_from_decisions() -> None:
    rows = [[["Teleport", False, "wait", False], ["Teleport", True, "navigate", False]]]
    m = episode_metrics(trace(rows=rows))
    assert m["collisions"] == 1 and m["blocked_ticks"] == 0  # stepping aside, not walking
    primitive = trace(
        skills=[
            (0, "agent_0", "MoveAhead", None, True, True),
            (0, "agent_1", "MoveAhead", None, True, False),
            (1, "agent_1", "MoveAhead", None, True, False),
        ],
        rows=[
            [["MoveAhead", True, "MoveAhead", False], ["MoveAhead", False, "MoveAhead", False]],
            [[None, None, None, False], ["MoveAhead", False, "MoveAhead", False]],
        ],
    )
    primitive["config"]["options"] = {"action_level": "primitive"}
    primitive["skills"][1]["reason"] = "blocked"  # agent_0 took the cell first
    primitive["skills"][2]["reason"] = "unreachable"  # a wall: no interference
    m = episode_metrics(primitive)
    assert m["collisions"] == 1 and m["blocked_ticks"] == 1


def test_zero_messages_and_influence() -> None:
    m = episode_metrics(trace())
    assert m["messages"] == 0 and m["message_tokens"] == 0 and m["influence_rate"] is None
    t = trace(
        n=3,
        skills=[
            (0, "agent_1", "navigate", "Apple|0|0|0", True, True),
            (0, "agent_2", "navigate", "Mug|0|0|0", True, True),
            (4, "agent_1", "navigate", "Fridge|9|9|9", True, True),
            (4, "agent_2", "navigate", "Mug|0|0|0", True, True),
        ],
        messages=[
            (2, "agent_0", ("agent_1", "agent_2"), 5, True),
            (3, "agent_0", ("agent_1",), 7, False),
        ],
    )
    m = episode_metrics(t)
    assert m["messages"] == 2 and m["message_tokens"] == 12
    assert (
        m["influence_rate"] == 0.5
    )  # agent_1 switched after the delivered message, agent_2 did not


def test_reference_metrics() -> None:
    row = add_reference_metrics({"n_agents": 2, "L": 20}, 30)
    assert row["speedup"] == 1.5 and row["parallel_efficiency"] == 0.75
    assert row["EI"] == pytest.approx(1 / 3)
    assert add_reference_metrics({"n_agents": 2, "L": 20}, None)["speedup"] is None


def test_specialisation_is_one_when_each_agent_has_its_own_subtask_type() -> None:
    split = trace(
        skills=[
            (0, "agent_0", "pickup", A0, True, True),
            (1, "agent_0", "pickup", A1, True, True),
            (0, "agent_1", "toggle_off", "Lamp|0|0|0", True, True),
        ]
    )
    assert specialisation([split]) == pytest.approx(1.0)
    mixed = trace(
        skills=[
            (0, "agent_0", "pickup", A0, True, True),
            (1, "agent_0", "put", "F|0|0|0", True, True),
            (0, "agent_1", "pickup", A1, True, True),
            (1, "agent_1", "put", "F|0|0|0", True, True),
        ]
    )
    assert specialisation([mixed]) == pytest.approx(0.0)
    assert specialisation([trace()]) is None


def test_formulas_directly() -> None:
    assert balance([0, 0]) == 0.0
    assert gini([1, 0]) == pytest.approx(0.5)
    assert workload_entropy([3]) is None
    assert workload_entropy([1, 0]) == 0.0  # one atom credited: defined, and all to one agent


def test_summary_intervals_stay_inside_the_metric_range() -> None:
    from benchmark.results.summary import interval_cell as _cell

    tr = _cell([0.0, 0.0, 0.25], metric("TR"))
    assert tr["lo"] == 0.0 and 0.0 < tr["hi"] <= 1.0 and tr["mean"] == pytest.approx(0.25 / 3)
    ticks = _cell([1.0, 1.0, 300.0], metric("L"))
    assert ticks["lo"] == 0.0 and ticks["hi"] > 300
    delta = _cell([-5.0, 1.0], None)
    assert delta["lo"] < -5.0


def test_a_type_level_atom_targets_every_object_of_its_type_and_no_other() -> None:
    bread = Atom("isSliced", "Bread", None, True, at_least=1)
    slices = Atom("isCooked", "BreadSliced", None, True, at_least=2)
    mug = Atom("isDirty", "Mug", None, False, at_least=1)
    t = trace(
        n=2,
        satisfied=(True, False, False),
        checklist=[bread, slices, mug],
        skills=[
            (0, "agent_0", "slice", "Bread|1|2|3", True, True),
            (1, "agent_1", "pickup", "Bread|1|2|3|BreadSliced_1", True, True),
            (2, "agent_1", "pickup", "Cup|0|0|0", True, True),
        ],
    )
    m = episode_metrics(t)
    assert m["C"] == pytest.approx(2 / 3)  # Bread and BreadSliced acted on, no Mug
    # A slice of the bread is an object of both types, so both agents attempted the Bread atom.
    assert m["redundancy"] == pytest.approx(1 / 3)


def test_an_object_level_atom_targets_only_its_own_object() -> None:
    t = trace(
        satisfied=(True,),
        checklist=[Atom("isSliced", "Bread|1|2|3", None, True)],
        skills=[(0, "agent_0", "pickup", "Bread|1|2|3|BreadSliced_0", True, True)],
    )
    assert episode_metrics(t)["C"] == 0.0


def test_the_atom_records_fields_decide_the_targets_not_its_key() -> None:
    t = trace(
        satisfied=(True,),
        checklist=[Atom("isCooked", "BreadSliced", None, True, at_least=1)],
        skills=[(0, "agent_0", "pickup", "Bread|1|2|3|BreadSliced_0", True, True)],
    )
    t["checklist"][0]["key"] = "isCooked(Mug|0|0|0)=true"
    assert episode_metrics(t)["C"] == 1.0


def test_primitive_level_actions_count_as_their_skill() -> None:
    skills = [
        (0, "agent_0", "PickupObject", A0, True, True),
        (0, "agent_1", "PickupObject", A0, True, False),
        (1, "agent_1", "ToggleObjectOff", "Lamp|0|0|0", True, True),
    ]
    primitive = episode_metrics(trace(skills=skills))
    assert primitive["C"] == 0.5 and primitive["redundancy"] == 0.5
    named = [
        (t, a, {"PickupObject": "pickup", "ToggleObjectOff": "toggle_off"}[s], *r)
        for t, a, s, *r in skills
    ]
    assert specialisation([trace(skills=skills)]) == specialisation([trace(skills=named)])
    assert specialisation([trace(skills=skills)]) > 0.0


def test_traces_of_another_format_or_inconsistent_length_are_rejected() -> None:
    old = trace()
    old["format"] = 1
    old["checklist"] = [a["key"] for a in old["checklist"]]
    with pytest.raises(ValueError, match="trace format 1"):
        episode_metrics(old)
    short = trace()
    short["checklist"] = short["checklist"][:1]
    with pytest.raises(ValueError, match="checklist has 1 atoms"):
        episode_metrics(short)
    empty = trace()
    empty["checklist"], empty["final"]["satisfied"] = [], []
    with pytest.raises(ValueError, match=r"^the trace.s checklist is empty: every task"):
        episode_metrics(empty)


def test_balance_needs_at_least_one_agent() -> None:
    with pytest.raises(ValueError, match=r"^balance needs one share per agent, got none$"):
        balance([])


def test_every_failed_and_every_idle_decision_is_wasted() -> None:
    t = trace(
        skills=[
            (0, "agent_0", "wait", None, True, True),
            (0, "agent_1", "pickup", A1, False, False),  # rejected
            (1, "agent_0", "wait", None, True, True),
            (1, "agent_1", "open", "Fridge|9|9|9", True, False),
            (2, "agent_0", "pickup", A0, True, True),
        ]
    )
    assert episode_metrics(t)["wasted_action_rate"] == pytest.approx(4 / 5)


def test_moving_to_a_target_or_a_rejected_skill_on_it_is_not_acting_on_it() -> None:
    t = trace(
        skills=[
            (0, "agent_0", "navigate", A0, True, True),
            (0, "agent_1", "pickup", A0, False, False),  # rejected
            (1, "agent_1", "pickup", A1, True, True),
        ]
    )
    m = episode_metrics(t)
    assert m["C"] == 0.5  # only Apple|1 was acted on
    assert m["redundancy"] == 0.0  # nobody attempted Apple|0 with an accepted object skill


def test_a_primitive_object_action_without_an_object_attempts_no_atom() -> None:
    t = trace(
        skills=[
            (0, "agent_0", "PickupObject", None, True, False),
            (0, "agent_1", "PickupObject", A0, True, True),
        ]
    )
    m = episode_metrics(t)
    assert m["redundancy"] == 0.0 and m["C"] == 0.5


def test_an_atom_held_from_the_start_is_credited_only_once_an_agent_remakes_it() -> None:
    # Both atoms hold when the episode starts; agent_1 undoes atom 0 and agent_0 redoes it.
    t = trace(atoms=[(1, "agent_1", 0, False), (3, "agent_0", 0, True)])
    assert episode_metrics(t)["credited"] == [1, 0]


def test_influence_pairs_skip_undelivered_messages_and_recipients_without_both_sides() -> None:
    # A decision at the message's tick is the one before it.
    t = trace(
        n=4,
        skills=[
            (0, "agent_1", "navigate", A0, True, True),
            (2, "agent_1", "navigate", A1, True, True),
            (5, "agent_1", "navigate", "Fridge|9|9|9", True, True),
            (2, "agent_2", "navigate", "Mug|0|0|0", True, True),
            (5, "agent_2", "navigate", "Mug|0|0|0", True, True),
            (5, "agent_3", "navigate", "Mug|0|0|0", True, True),
        ],
        messages=[
            (0, "agent_0", ("agent_1",), 3, False),
            (2, "agent_0", ("agent_3", "agent_1", "agent_2"), 5, True),
            (3, "agent_0", ("agent_1",), 4, True),
        ],
    )
    # Pairs: (tick 2, agent_1) Apple|1 -> Fridge, influenced; (tick 2, agent_2) Mug -> Mug, not;
    # (tick 3, agent_1) Apple|1 -> Fridge, influenced; agent_3 decided nothing before tick 2.
    assert episode_metrics(t)["influence_rate"] == pytest.approx(2 / 3)


# agent_0 picks up twice, agent_1 picks up once and puts once: p(agent) = (1/2, 1/2),
# p(type) = (3/4, 1/4), p(agent, type) = (1/2, 1/4, 1/4).
H_AGENT = math.log(2)
H_TYPE = math.log(4) - 3 / 4 * math.log(3)
MUTUAL = H_AGENT + H_TYPE - 3 / 2 * math.log(2)
PARTIAL_SPLIT_NMI = MUTUAL / math.sqrt(H_AGENT * H_TYPE)  # 0.3456


def test_specialisation_of_a_partial_split_counts_only_accepted_object_skills() -> None:
    t = trace(
        skills=[
            (0, "agent_0", "pickup", A0, True, True),
            (1, "agent_0", "pickup", A1, True, True),
            (0, "agent_1", "pickup", A1, True, False),
            (1, "agent_1", "put", "Fridge|9|9|9", True, True),
            (2, "agent_0", "navigate", "Fridge|9|9|9", True, True),
            (2, "agent_1", "pickup", A0, False, False),  # rejected
            (3, "agent_1", "wait", None, True, True),
        ]
    )
    assert specialisation([t]) == pytest.approx(PARTIAL_SPLIT_NMI)


def test_specialisation_is_zero_when_one_agent_or_one_type_has_every_decision() -> None:
    one_agent = trace(
        skills=[
            (0, "agent_0", "pickup", A0, True, True),
            (1, "agent_0", "put", "Fridge|9|9|9", True, True),
        ]
    )
    one_type = trace(
        skills=[
            (0, "agent_0", "pickup", A0, True, True),
            (0, "agent_1", "pickup", A1, True, True),
        ]
    )
    assert specialisation([one_agent]) == 0.0 and specialisation([one_type]) == 0.0


def test_run_metrics_pool_the_decisions_of_every_episode() -> None:
    first = trace(
        skills=[
            (0, "agent_0", "pickup", A0, True, True),
            (0, "agent_1", "pickup", A1, True, False),
        ]
    )
    second = trace(
        skills=[
            (0, "agent_0", "pickup", A1, True, True),
            (1, "agent_1", "put", "Fridge|9|9|9", True, True),
        ]
    )
    assert run_metrics(iter([first, second])) == {
        "specialisation": pytest.approx(PARTIAL_SPLIT_NMI)
    }
