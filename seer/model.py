"""A trained two-stage selector and its JSON file format (never pickle).

Stage 1 looks only at the op's *known* features (free to compute) and either names a variant
or answers :data:`GATHER`: "computing the gathered features pays off here". Stage 2 looks at
known and gathered features and always names a variant. Both stages have one tree per expected
number of calls on the same input (1, 10, 100, ...): a gathering pass that costs more than one
call can still pay over a hundred, and so can a variant's one-time preparation. A count
between two trained ones uses the tree of the smaller (:func:`nearest_calls`).

File layout (``SCHEMA = "seer.model/2"``): one JSON object with ``schema``, ``op``,
``variants``, ``known_features``, ``gathered_features``, ``stage1`` (``{"<calls>": tree}``),
``stage2`` (``{"<calls>": tree}`` or null), ``device`` (``{"name", "capability"}``, and
``"sm_count"`` where the profile table recorded it),
``versions``, ``training`` and ``checksum`` (``{"sha256": ...}`` of the canonical JSON of
everything else, so a file edited by hand or damaged on disk is refused). Trees use
:meth:`seer.tree.Tree.to_dict`. Version 1 files (``"seer.model/1"``, from before preparation
costs were charged) are still read: their ``stage2`` is a single tree (or null), which then
serves every call count.
"""
from __future__ import annotations

import hashlib
import importlib
import errno
import json
import math
import numbers
import os
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from seer import registry
from seer.errors import InputError, ModelError
from seer.files import replace_together
from seer.features_base import Feature
from seer.tree import Tree

SCHEMA = "seer.model/2"
SCHEMA_V1 = "seer.model/1"  # one stage-2 tree for every call count
KNOWN_SCHEMAS = (SCHEMA_V1, SCHEMA)
GATHER = "gather"
FIELDS = (
    "schema", "op", "variants", "known_features", "gathered_features",
    "stage1", "stage2", "device", "versions", "training",
)


# ---------------------------------------------------------------------- op feature metadata


def op_feature_module(op: str) -> ModuleType | None:
    """The op's feature module, or None when seer has none (unregistered op, module not written).

    Only the feature module is imported, not the kernels: training and rule export need the
    feature names and labels, not the GPU code.
    """
    entry = registry.OPS.get(op)
    if entry is None:
        return None
    try:
        return importlib.import_module(entry.features)
    except ModuleNotFoundError as error:
        if error.name != entry.features:
            raise  # the module exists but one of its imports is missing: a real bug
        return None


def feature_info(op: str, names: Iterable[str]) -> dict[str, Feature]:
    """``Feature`` per name from the op's module; a plain ``Feature(name, name)`` when it has none."""
    module = op_feature_module(op)
    known = {} if module is None else {f.name: f for f in (*module.KNOWN, *module.GATHERED)}
    return {name: known.get(name, Feature(name, name)) for name in names}


def nearest_calls(trained: Collection[int], calls: int) -> int:
    """The largest trained call count <= ``calls`` (the smallest one when ``calls`` is below all)."""
    if not isinstance(calls, numbers.Real) or isinstance(calls, bool) or not calls >= 1:  # NaN too
        raise InputError(f"calls must be a number of calls >= 1, got {calls!r}")
    if calls in trained:  # the common case (one call, or a trained count), without sorting
        return calls
    counts = sorted(trained)
    return max((c for c in counts if c <= calls), default=counts[0])


# ---------------------------------------------------------------------- the model


class RulePath(Sequence[str]):
    """The rules behind a choice, one line each, worded only when first read: a first
    ``seer.dispatch`` call on a new input should not pay for text nobody reads (formatting every
    step's feature value and threshold was a sixth of its host time)."""

    def __init__(self, *parts: str | Callable[[], list[str]]):
        self._parts, self._lines = parts, None

    def _text(self) -> list[str]:
        if self._lines is None:
            self._lines = [line for part in self._parts for line in ([part] if isinstance(part, str) else part())]
        return self._lines

    def __getitem__(self, index):
        return self._text()[index]

    def __len__(self) -> int:
        return len(self._text())

    def __eq__(self, other) -> bool:
        return self._text() == (other._text() if isinstance(other, RulePath) else other)

    __hash__ = None  # mutable-looking, like the list it stands for

    def __repr__(self) -> str:
        return repr(self._text())


@dataclass(frozen=True)
class Choice:
    """What the model chose for one input and why."""

    variant: str
    gathered: bool
    path: RulePath
    stage: int


@dataclass
class SelectorModel:
    op: str
    variants: tuple[str, ...]
    known_features: tuple[str, ...]
    gathered_features: tuple[str, ...]
    stage1: dict[int, Tree]
    stage2: dict[int, Tree] | None
    device: dict = field(default_factory=dict)
    versions: dict = field(default_factory=dict)
    training: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.variants = tuple(self.variants)
        self.known_features = tuple(self.known_features)
        self.gathered_features = tuple(self.gathered_features)
        _check_consistent(self)
        self._info: dict[str, Feature] | None = None
        self.read_as = SCHEMA  # the schema of the file or dict it was read from; a /1 file checksums its old layout

    # ------------------------------------------------------------------ choosing

    def stage1_tree(self, calls: int = 1) -> Tree:
        """The stage-1 tree trained for the largest call count <= ``calls``."""
        return self.stage1[nearest_calls(self.stage1, calls)]

    def stage2_tree(self, calls: int = 1) -> Tree:
        """The stage-2 tree trained for the largest call count <= ``calls``."""
        if self.stage2 is None:
            raise ModelError(f"this {self.op} model has no stage 2 (it was trained without gathered features)")
        return self.stage2[nearest_calls(self.stage2, calls)]

    @property
    def call_counts(self) -> list[int]:
        """The call counts the trees were trained for, in order."""
        return sorted({*self.stage1, *(self.stage2 or ())})

    def next_count(self, calls: int) -> int | None:
        """The least trained call count above ``calls`` whose trees differ from those for
        ``calls``, where deciding again for that many calls may choose otherwise; else None."""
        def decides_as_now(count: int) -> bool:
            return self.stage1_tree(count).decides_as(self.stage1_tree(calls)) and (
                self.stage2 is None or self.stage2_tree(count).decides_as(self.stage2_tree(calls)))

        return next((count for count in self.call_counts if count > calls and not decides_as_now(count)), None)

    def choose(
        self, known: Mapping[str, float], gather: Callable[[], Mapping[str, float]], calls: int = 1,
        free: Mapping[str, float] | None = None,
    ) -> Choice:
        """Pick a variant; ``gather()`` runs only when stage 1 says gathering pays.

        ``free``: gathered features already at hand at no cost (a validation pass measured
        them); then stage 2 decides at once, as stage 1 would gather at no cost."""
        if free is not None and self.stage2 is not None:
            variant, path = self._walk_stage2({**known, **free}, calls)
            return Choice(variant, True, RulePath("gathered features came with the validation pass", path), 2)
        label, path = self._walk("stage 1", self.stage1, nearest_calls(self.stage1, calls), known)
        if label != GATHER:
            return Choice(label, False, RulePath(path), 1)
        variant, more = self._walk_stage2({**known, **gather()}, calls)
        return Choice(variant, True, RulePath(path, more), 2)

    def _walk_stage2(self, features: Mapping[str, float], calls: int) -> tuple[str, Callable[[], list[str]]]:
        return self._walk("stage 2", self.stage2, nearest_calls(self.stage2, calls), features)

    def _walk(self, stage: str, trees: Mapping[int, Tree], count: int,
              features: Mapping[str, float]) -> tuple[str, Callable[[], list[str]]]:
        """The label of the tree ``trees[count]`` for ``features`` and a function wording the steps
        that led to it, the tree named by the calls it serves as the rules name it."""
        tree = trees[count]
        values = _values(tree, features)
        label = tree.predict(values)

        def words() -> list[str]:
            from seer.rules import served_calls  # rules reads models; imported when wording, not on every choice

            info = self.feature_info()
            return [*(step.describe(info[step.feature]) for step in tree.decision_path(values)),
                    f"{stage} (tree for {served_calls(trees, count)}) -> {label}"]

        return label, words

    def feature_info(self) -> dict[str, Feature]:
        """How each feature prints (looked up once from the op's feature module)."""
        if self._info is None:
            self._info = feature_info(self.op, (*self.known_features, *self.gathered_features))
        return self._info

    # ------------------------------------------------------------------ serialisation

    def to_dict(self) -> dict:
        """The model as its JSON file holds it (see :func:`_as_read_back`)."""
        return _as_read_back({
            "schema": SCHEMA,
            "op": self.op,
            "variants": list(self.variants),
            "known_features": list(self.known_features),
            "gathered_features": list(self.gathered_features),
            "stage1": _trees_to_dict(self.stage1),
            "stage2": None if self.stage2 is None else _trees_to_dict(self.stage2),
            "device": self.device,
            "versions": self.versions,
            "training": self.training,
        })

    @classmethod
    def from_dict(cls, data: Mapping, op: str | None = None) -> SelectorModel:
        """Validate and rebuild; ``op`` (when given) must match the model's op."""
        if not isinstance(data, Mapping):
            raise ModelError(f"a model is a JSON object, got {type(data).__name__}")
        _check_schema(data.get("schema"))
        missing = [key for key in FIELDS if key not in data]
        if missing:
            raise ModelError(f"model is missing field(s) {missing}")
        unknown = sorted(str(key) for key in data if key not in FIELDS)
        if unknown:  # a later seer's field would be dropped in silence, and the header's checksum be another's
            raise ModelError(f"model has field(s) {unknown} that {data['schema']} does not define: written by "
                             "another seer, or edited by hand; retrain it with this seer")
        _check_op(data["op"], op)
        for key in ("variants", "known_features", "gathered_features"):
            if not isinstance(data[key], list) or not all(isinstance(v, str) for v in data[key]):
                raise ModelError(f"model field {key!r} must be a list of strings")
        for key in ("device", "versions", "training"):
            if not isinstance(data[key], dict):
                raise ModelError(f"model field {key!r} must be an object")
        model = cls(
            op=data["op"],
            variants=data["variants"],
            known_features=data["known_features"],
            gathered_features=data["gathered_features"],
            stage1=_trees_from_dict(data["stage1"], "stage1"),
            stage2=_stage2_from_dict(data["stage2"], data["schema"]),
            device=data["device"],
            versions=data["versions"],
            training=data["training"],
        )
        model.read_as = data["schema"]
        _check_op_features(model)
        return model

    def check_for(self, op: str) -> None:
        """ModelError unless this model can serve ``op``: what :meth:`load` checks of a file, for a
        model built or loaded elsewhere and handed to dispatch."""
        _check_op(self.op, op)
        _check_op_features(self)

    def save(self, path: str | Path) -> Path:
        """Write JSON with a checksum of its content; returns the path.

        dispatch reads a model file again once it changes: the file is replaced whole
        (:func:`seer.files.replace_atomically`: never found half written, a link followed, its
        permissions kept), and a read-only one is refused."""
        return self.save_with(path, {})

    def save_with(self, path: str | Path, beside: dict[str, str]) -> Path:
        """:meth:`save`, and the texts ``beside`` (by suffix: the rules) next to it, written together
        (:func:`seer.files.replace_together`): a write that fails leaves the model and its rules as they
        were, never a new model beside the old one's rules. Returns the model's path."""
        path = Path(path)
        content = self.to_dict()
        document = {**content, "checksum": {"sha256": checksum(content)}}
        if path.exists() and not os.access(path, os.W_OK):
            raise PermissionError(errno.EACCES, "the model file is read-only", str(path))
        if path.is_dir() or not path.parent.is_dir():
            raise ModelError(f"cannot save the model to {path}: " + ("it is a folder" if path.is_dir() else
                                                                        f"there is no folder {path.parent}"))
        files = {path: (json.dumps(document, indent=1, allow_nan=False) + "\n").encode()}
        files |= {path.with_suffix(suffix): text.encode("utf-8") for suffix, text in beside.items()}
        try:
            replace_together(files)
        except OSError as error:
            raise ModelError(f"cannot save the model to {path}: {error.strerror or error}") from None
        return path

    @classmethod
    def load(cls, path: str | Path, op: str | None = None) -> SelectorModel:
        """Read a model file, refusing anything missing, damaged, foreign or inconsistent."""
        path = Path(path)
        if path.is_dir():  # "does not exist" would send the user looking for a path that is there
            raise ModelError(f"{path} is a folder, not a model file; name a model file (.json) instead")
        if not path.is_file():
            raise ModelError(f"model file {path} does not exist")
        try:
            document = json.loads(path.read_text())
        except OSError as error:  # no permission, or a read failing: dispatch then skips the file, warning
            raise ModelError(f"cannot read model file {path}: {error.strerror or error}") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise ModelError(f"model file {path} is not JSON: {error}") from None
        except RecursionError:
            raise ModelError(f"model file {path} nests deeper than any model does: it is not a seer model") from None
        except ValueError as error:  # e.g. an integer of more digits than Python converts
            raise ModelError(f"model file {path} holds a value no model has: {error}") from None
        if not isinstance(document, dict):
            raise ModelError(f"model file {path} holds a JSON {type(document).__name__}, not an object")
        try:
            _check_schema(document.get("schema"))
            _check_checksum(document)
            return cls.from_dict(document, op)
        except ModelError as error:
            raise ModelError(f"model file {path}: {error}") from None


# ---------------------------------------------------------------------- helpers


def _as_read_back(content: dict) -> dict:
    """``content`` as JSON reads it back: numpy numbers and arrays (a hyper-parameter or call count
    given as one) as Python's, tuples as lists, keys as strings; so the checksum :meth:`save` writes is
    the one :meth:`load` recomputes (integer keys sort otherwise as numbers, then as text)."""
    def plain(value):
        if isinstance(value, (np.generic, np.ndarray)):
            return value.tolist()
        raise ModelError(f"the model holds a {type(value).__name__} ({value!r}), which a model file cannot: "
                         "give numbers, strings, lists and dicts")

    return json.loads(json.dumps(content, default=plain))


def _values(tree: Tree, features: Mapping[str, float]) -> list[float]:
    """The tree's features as Python floats (a float32 would compare in float32 against a float64
    bound); an InputError naming a feature that is missing, NaN or no number (a string, None, a bool,
    an array: each would be read as something it is not). An infinity lies beyond every bound."""
    values = []
    for name in tree.features:
        if name not in features:
            raise InputError(f"the model needs feature {name!r}; got {sorted(features)}")
        value = features[name]
        if not isinstance(value, numbers.Real) or isinstance(value, (bool, np.bool_)):
            raise InputError(f"feature {name!r} must be a number, got {value!r} ({type(value).__name__})")
        try:
            values.append(float(value))
        except OverflowError:
            values.append(math.inf if value > 0 else -math.inf)  # an integer past float range
    if any(v != v for v in values):
        bad = [name for name, v in zip(tree.features, values) if v != v]
        raise InputError(f"features {bad} are NaN")
    return values


def checksum(content: Mapping) -> str:
    """sha256 of the canonical JSON of a model's content (everything but the checksum); ModelError
    where the content holds a number JSON cannot carry (NaN, an infinity, or a literal such as 1e400
    that reads as one), which no model :meth:`SelectorModel.save` accepts."""
    try:
        canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    except ValueError:
        where, value = _non_finite(content)
        raise ModelError(f"{where} is {value}, not a finite number: the model is corrupted; retrain or restore it") from None
    return hashlib.sha256(canonical.encode()).hexdigest()


def _non_finite(content: Any, where: str = "the model") -> tuple[str, float] | None:
    """(where, value) of the first non-finite float in ``content``, depth first; None if there is none."""
    if isinstance(content, float) and not math.isfinite(content):
        return where, content
    items = content.items() if isinstance(content, Mapping) else enumerate(content) if isinstance(content, list) else ()
    for key, value in items:
        found = _non_finite(value, f"{where}[{key!r}]")
        if found is not None:
            return found
    return None


def _check_op(found: Any, expected: str | None) -> None:
    if not isinstance(found, str) or not found:
        raise ModelError(f"model field 'op' must be an op's name (a string), got {found!r}")
    if expected is not None and found != expected:
        raise ModelError(f"model is for op {found!r}, expected {expected!r}")


def _check_op_features(model: SelectorModel) -> None:
    """The model may only ask for features its op's module computes: one naming others would load,
    then fail every dispatch blaming the input. Unchecked for an op seer has no feature module for."""
    module = op_feature_module(model.op)
    if module is None:
        return
    computed = {"known": [f.name for f in module.KNOWN], "gathered": [f.name for f in module.GATHERED]}
    listed = {"known": model.known_features, "gathered": model.gathered_features}
    for kind, names in listed.items():
        foreign = [name for name in names if name not in computed[kind]]
        if foreign:
            raise ModelError(f"its {kind} features {foreign} are not among those op {model.op!r} computes "
                             f"({computed[kind]}): the model is not for this op's features; retrain it on a "
                             f"profile table of {model.op!r}")


def _check_schema(schema: Any) -> None:
    if schema not in KNOWN_SCHEMAS:
        raise ModelError(f"unknown schema {schema!r}; this seer reads {list(KNOWN_SCHEMAS)}")


def _check_checksum(document: dict) -> None:
    if "checksum" not in document:
        raise ModelError("no checksum (field 'checksum': {'sha256': ...}); models are written by SelectorModel.save")
    stored = document.pop("checksum")
    if not isinstance(stored, dict) or not isinstance(stored.get("sha256"), str):
        raise ModelError(f"the checksum field must be {{'sha256': '<hex digest>'}}, got {stored!r}: the file was "
                         "corrupted or edited by hand; retrain or restore it")
    if stored["sha256"] != checksum(document):
        raise ModelError("checksum mismatch: the file was corrupted or edited by hand; retrain or restore it")


def _trees_to_dict(trees: Mapping[int, Tree]) -> dict[str, dict]:
    return {str(calls): tree.to_dict() for calls, tree in sorted(trees.items())}


def _trees_from_dict(data: Any, stage: str) -> dict[int, Tree]:
    """``{"<calls>": tree}`` of one stage as ``{calls: Tree}``."""
    if not isinstance(data, dict) or not data:
        raise ModelError(f"{stage} must be a non-empty object mapping call counts to trees")
    trees = {}
    for key, tree in data.items():
        # As written by _trees_to_dict: ASCII digits without leading zeros ("01" would stand for
        # the same count as "1", and str.isdigit also accepts digits such as "²" that int() refuses).
        if not (isinstance(key, str) and key.isascii() and key.isdigit() and len(key) <= 18 and str(int(key)) == key
                and int(key) >= 1):
            raise ModelError(f"{stage} keys are call counts >= 1 written in decimal digits, got {key!r}")
        trees[int(key)] = Tree.from_dict(tree, f"{stage}[{key}]")
    return trees


def _stage2_from_dict(data: Any, schema: str) -> dict[int, Tree] | None:
    if data is None:
        return None
    if schema == SCHEMA_V1:  # one tree, trained on times per call alone: it serves every count
        return {1: Tree.from_dict(data, "stage2")}
    return _trees_from_dict(data, "stage2")


def _check_consistent(model: SelectorModel) -> None:
    """Trees may only use the model's features and choose among its variants (+ gather)."""
    if len(set(model.variants)) != len(model.variants) or not model.variants:
        raise ModelError(f"variants must be distinct and non-empty, got {list(model.variants)}")
    if GATHER in model.variants:
        raise ModelError(f"{GATHER!r} is reserved for stage 1 and cannot name a variant")
    if not model.stage1:
        raise ModelError("the model has no stage-1 tree")
    if model.stage2 is not None and not (isinstance(model.stage2, Mapping) and model.stage2):
        raise ModelError(f"stage2 must map call counts to trees, or be None; got {model.stage2!r}")
    _check_provenance(model)
    choices = set(model.variants) | ({GATHER} if model.stage2 is not None else set())
    for calls, tree in model.stage1.items():
        _check_tree(tree, f"stage1[{calls}]", set(model.known_features), choices)
    for calls, tree in (model.stage2 or {}).items():
        features = set(model.known_features) | set(model.gathered_features)
        _check_tree(tree, f"stage2[{calls}]", features, set(model.variants))


def _check_provenance(model: SelectorModel) -> None:
    """What dispatch reads of the provenance to pick a model (the GPU's name and compute capability,
    the world sizes trained at), to warn of extrapolation (the element sizes trained on) and to decide
    off a GPU (its SM count) must have the types it uses them as."""
    name, capability = model.device.get("name"), model.device.get("capability")
    if name is not None and not isinstance(name, str):
        raise ModelError(f"device name must be a string or null, got {name!r}")
    if capability is not None and not is_capability(capability):
        raise ModelError(f"device capability must be [major, minor] or null, got {capability!r}")
    sm_count = model.device.get("sm_count")
    if sm_count is not None and not is_count(sm_count, least=1):
        raise ModelError(f"device sm_count must be a whole number >= 1 or null, got {sm_count!r}")
    dtype = model.training.get("dtype")
    if dtype is not None and not isinstance(dtype, str):  # dispatch names it in a warning as a dtype
        raise ModelError(f"training dtype must be a dtype's name such as 'float32', or null, got {dtype!r}")
    for name, what in (("world_sizes", "world sizes"), ("element_sizes", "element sizes in bytes")):
        sizes = model.training.get(name)
        if sizes is not None and not (isinstance(sizes, (list, tuple)) and all(is_count(v, least=1) for v in sizes)):
            raise ModelError(f"training {name} must be a list of {what} (whole numbers >= 1), got {sizes!r}")


def is_capability(value: Any) -> bool:
    """A CUDA compute capability as the provenance stores it: ``[major, minor]``, whole numbers >= 0
    (a model's and a profile table's metadata alike)."""
    return isinstance(value, (list, tuple)) and len(value) == 2 and all(is_count(v, least=0) for v in value)


def is_count(value: Any, least: int) -> bool:
    """A whole number (not a bool) of at least ``least``."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def _check_tree(tree: Tree, where: str, features: set[str], labels: set[str]) -> None:
    unknown = sorted(set(tree.features) - features)
    if unknown:
        raise ModelError(f"{where} uses features {unknown} that the model does not list")
    chosen = {tree.labels[i] for i in tree.label if i >= 0}
    stray = sorted(chosen - labels)
    if stray:
        raise ModelError(f"{where} chooses {stray}, which are not among {sorted(labels)}")
