"""Object state changes: toggling, slicing, cooking, breaking, cleaning, liquids, using up.

Heat, cold and running water act on what objects hold; :func:`settle` applies them after every
action that can change what rests where or what is switched on.
"""

from __future__ import annotations

import math

from benchmark.sim.facts import Transformation
from benchmark.sim.scene import ObjState, spec_from_record
from benchmark.sim.world import OK, ActionResult, World, find_target

LIQUIDS = ("coffee", "wine", "water")
_BASINS = ("SinkBasin", "BathtubBasin")
FAUCET_REACH = 1.0  # metres from a faucet to the basin it fills


def heat_is_on(world: World, index: int) -> bool:
    """Whether a heat source is switched on: by itself, or (a StoveBurner) by its knob."""
    spec = world.specs[index]
    if spec.toggleable:
        return world.objs[index].is_toggled
    return any(
        world.objs[k].is_toggled and index in world.specs[k].controlled for k in _knobs(world)
    )


def _knobs(world: World) -> list[int]:
    return [s.index for s in world.specs if s.controlled]


def _basin_of(world: World, faucet: int) -> int:
    fx, _, fz = world.position(faucet)
    best, best_d = -1, FAUCET_REACH
    for s in world.specs:
        if s.object_type in _BASINS and world.objs[s.index].active:
            x, _, z = world.position(s.index)
            d = math.hypot(x - fx, z - fz)
            if d < best_d:
                best, best_d = s.index, d
    return best


def settle(world: World) -> None:
    """Apply heat, cold, brewing and running water to the objects they act on."""
    children = world.children()
    for spec in world.specs:
        k = spec.index
        st = world.objs[k]
        if not st.active:
            continue
        if spec.is_heat_source and heat_is_on(world, k):
            for d in world.descendants(k, children):
                ds, dst = world.specs[d], world.objs[d]
                if ds.cookable and not dst.is_cooked:
                    world.update(d, is_cooked=True, temperature="Hot")
                if (
                    spec.object_type == "CoffeeMachine"
                    and ds.can_fill
                    and not dst.is_filled
                    and not dst.is_broken
                ):
                    world.update(d, is_filled=True, fill_liquid="coffee", temperature="Hot")
        elif spec.is_cold_source:
            for d in world.descendants(k, children):
                if world.objs[d].temperature != "Cold":
                    world.update(d, temperature="Cold")
        elif spec.object_type == "Faucet" and st.is_toggled:
            basin = _basin_of(world, k)
            for d in world.descendants(basin, children) if basin >= 0 else ():
                ds, dst = world.specs[d], world.objs[d]
                if ds.dirtyable and dst.is_dirty:
                    world.update(d, is_dirty=False)
                if ds.can_fill and not dst.is_filled and not dst.is_broken:
                    world.update(d, is_filled=True, fill_liquid="water")


def toggle(
    world: World, a: int, action: str, objectId: str, forceAction: bool = False
) -> ActionResult:
    index, fail = find_target(world, a, action, objectId, forceAction, allow_held=True)
    if fail:
        return fail
    if not world.specs[index].toggleable:
        return ActionResult(False, f"{action} failed: {objectId} is not toggleable")
    on = action == "ToggleObjectOn"
    st = world.objs[index]
    if st.is_toggled == on:
        return ActionResult(
            False, f"{action} failed: {objectId} is already {'on' if on else 'off'}"
        )
    if st.is_broken:
        return ActionResult(False, f"{action} failed: {objectId} is broken")
    world.update(index, is_toggled=on)
    settle(world)
    return OK


def _pieces(world: World, index: int, change: Transformation, created: str) -> None:
    """Replace object ``index`` by ``change.count`` pieces of type ``change.into``.

    Pieces share the original's receptacle and split its box along the longer horizontal axis.
    """
    spec, st = world.specs[index], world.objs[index]
    facts = world.facts.derived_types.get(change.into, {})
    x0, x1, y0, y1, z0, z1 = world.box(index)
    along_x = (x1 - x0) >= (z1 - z0)
    n = change.count
    for k in range(n):
        if along_x:
            bx0, bx1, bz0, bz1 = x0 + (x1 - x0) * k / n, x0 + (x1 - x0) * (k + 1) / n, z0, z1
        else:
            bx0, bx1, bz0, bz1 = x0, x1, z0 + (z1 - z0) * k / n, z0 + (z1 - z0) * (k + 1) / n
        cx, cy, cz = (bx0 + bx1) / 2, (y0 + y1) / 2, (bz0 + bz1) / 2
        size = {"x": bx1 - bx0, "y": y1 - y0, "z": bz1 - bz0}
        record = dict(spec.record)
        record.update(
            {
                "objectId": f"{spec.object_id}|{change.into}_{k}",
                "objectType": change.into,
                "name": f"{change.into}_{k}_{created}",
                "assetId": "",
                "pickupable": bool(facts.get("pickupable", True)),
                "cookable": bool(facts.get("cookable", False)),
                "salientMaterials": list(facts.get("salientMaterials", ["Food"])),
                "mass": float(record.get("mass") or 0.0) / n,
                "position": {"x": cx, "y": y0, "z": cz},
                "axisAlignedBoundingBox": {"center": {"x": cx, "y": cy, "z": cz}, "size": size},
            }
        )
        for flag in (
            "receptacle",
            "openable",
            "toggleable",
            "sliceable",
            "breakable",
            "dirtyable",
            "canFillWithLiquid",
            "canBeUsedUp",
            "isHeatSource",
            "isColdSource",
            "moveable",
        ):
            record[flag] = False
        record["controlledObjects"] = None
        new_spec = spec_from_record(len(world.specs), record, source=index)
        world.add_object(
            new_spec,
            ObjState(
                x=cx,
                y=y0,
                z=cz,
                parent=st.parent,
                holder=-1,
                is_open=False,
                openness=0.0,
                is_toggled=False,
                is_sliced=False,
                is_cooked=st.is_cooked,
                is_broken=False,
                is_dirty=False,
                is_filled=False,
                fill_liquid=None,
                is_used_up=False,
                temperature=st.temperature,
                active=True,
            ),
        )
    world.update(index, parent=-1, active=False)


def slice_object(
    world: World, a: int, action: str, objectId: str, forceAction: bool = False
) -> ActionResult:
    agent = world.agents[a]
    tools = world.facts.slicing_tools
    if agent.held < 0 or world.specs[agent.held].object_type not in tools:
        return ActionResult(
            False, f"{action} failed: the agent must hold one of {sorted(tools)} to slice"
        )
    index, fail = find_target(world, a, action, objectId, forceAction, allow_held=False)
    if fail:
        return fail
    spec = world.specs[index]
    if not spec.sliceable:
        return ActionResult(False, f"{action} failed: {objectId} is not sliceable")
    if world.objs[index].is_sliced:
        return ActionResult(False, f"{action} failed: {objectId} is already sliced")
    world.update(index, is_sliced=True)
    change = world.facts.slicing.get(spec.object_type)
    if change is not None:
        _pieces(world, index, change, f"t{world.tick}")
    return OK


def _flag_change(
    world: World,
    a: int,
    action: str,
    objectId: str,
    forceAction: bool,
    capability: str,
    field: str,
    value: bool,
    already: str,
) -> tuple[int, ActionResult]:
    index, fail = find_target(world, a, action, objectId, forceAction, allow_held=True)
    if fail:
        return -1, fail
    spec = world.specs[index]
    if not getattr(spec, capability):
        return -1, ActionResult(
            False, f"{action} failed: {objectId} is not {capability.replace('_', ' ')}"
        )
    if getattr(world.objs[index], field) == value:
        return -1, ActionResult(False, f"{action} failed: {objectId} is already {already}")
    return index, OK


def cook(
    world: World, a: int, action: str, objectId: str, forceAction: bool = False
) -> ActionResult:
    index, res = _flag_change(
        world, a, action, objectId, forceAction, "cookable", "is_cooked", True, "cooked"
    )
    if index >= 0:
        world.update(index, is_cooked=True, temperature="Hot")
    return res


def break_object(
    world: World, a: int, action: str, objectId: str, forceAction: bool = False
) -> ActionResult:
    index, res = _flag_change(
        world, a, action, objectId, forceAction, "breakable", "is_broken", True, "broken"
    )
    if index < 0:
        return res
    world.update(index, is_broken=True, is_filled=False, fill_liquid=None)
    change = world.facts.breaking.get(world.specs[index].object_type)
    if change is not None:
        if world.carrier(index) == a:
            agent = world.agents[a]
            world.update(index, holder=-1)
            world.move_agent(a, agent._replace(held=-1))
        _pieces(world, index, change, f"t{world.tick}")
    return OK


def clean_dirty(
    world: World, a: int, action: str, objectId: str, forceAction: bool = False
) -> ActionResult:
    dirty = action == "DirtyObject"
    index, res = _flag_change(
        world,
        a,
        action,
        objectId,
        forceAction,
        "dirtyable",
        "is_dirty",
        dirty,
        "dirty" if dirty else "clean",
    )
    if index >= 0:
        world.update(index, is_dirty=dirty)
    return res


def fill(
    world: World, a: int, action: str, objectId: str, fillLiquid: str, forceAction: bool = False
) -> ActionResult:
    if fillLiquid not in LIQUIDS:
        raise ValueError(f"{action}: fillLiquid={fillLiquid!r} is not one of {list(LIQUIDS)}")
    index, res = _flag_change(
        world, a, action, objectId, forceAction, "can_fill", "is_filled", True, "filled"
    )
    if index < 0:
        return res
    if world.objs[index].is_broken:
        return ActionResult(False, f"{action} failed: {objectId} is broken")
    world.update(index, is_filled=True, fill_liquid=fillLiquid)
    return OK


def empty(
    world: World, a: int, action: str, objectId: str, forceAction: bool = False
) -> ActionResult:
    index, res = _flag_change(
        world, a, action, objectId, forceAction, "can_fill", "is_filled", False, "empty"
    )
    if index >= 0:
        world.update(index, is_filled=False, fill_liquid=None)
    return res


def use_up(
    world: World, a: int, action: str, objectId: str, forceAction: bool = False
) -> ActionResult:
    index, res = _flag_change(
        world, a, action, objectId, forceAction, "can_be_used_up", "is_used_up", True, "used up"
    )
    if index >= 0:
        world.update(index, is_used_up=True)
    return res
