"""Imagining rollouts with a grounded LM: batched, KV-cached decoding of state/action slots.

For a batch of (task, instruction, real initial state) triples the prompt and the initial
state are encoded once; then every step feeds one action slot and one state slot:

    hidden at s_t  -> action head -> a_t (greedy or sampled)  -> feed a_t
    hidden at a_t  -> state head  -> s_{t+1} (= s_t + change) -> feed s_{t+1}

An action spelled in words is decoded word by word, each word chosen given the ones before it.

With the KV cache each feed is a one-position forward pass. ``use_cache=False`` instead re-runs
the whole sequence for every slot (what the reference implementation does, minus its
one-step action lag) and yields the same rollouts; it exists for tests and the benchmark.
A rollout stops when its task's success function holds on the imagined states, at the
horizon, or (with a legality rule) at its first state that breaks the domain's rules, or (with
a confidence rule and a threshold) at its first transition trusted less than the threshold —
unless a redrawn action (``illegal_retries``: the cache is rewound to before the action and
only the offending rows sample again) leads to an acceptable one; finished rollouts leave the
batch.
Each rollout carries the LM's log-likelihood of its actions (summed over steps), so candidates
can be ranked by the model's own belief, and per step the log-likelihood of the whole step
(its action, plus its next state under a categorical state head): the likelihood confidence
(:mod:`~imaginebench.imagination.confidence`). A module
fine-tuned on windows of W transitions decodes W transitions per prompt, then prompts again
("Trajectory from step t:") from the last imagined state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Literal

import numpy as np
import torch
from torch import Tensor
from tqdm.auto import tqdm

from imaginebench.config import as_config
from imaginebench.data.dataset import Episode
from imaginebench.envs.base import EpisodeSpec, Task
from imaginebench.modules.grounding.sequences import NO_INSTRUCTION, to_device

if TYPE_CHECKING:
    from imaginebench.imagination.journal import Journal
    from imaginebench.imagination.lookahead import Lookahead

Strategy = Literal["greedy", "sample"]
GuidanceReference = Literal["empty", "nearest_seen"]
StageTasks = Literal["off", "lm", "both"]


@dataclass
class DecodingConfig:
    """How actions are chosen while imagining.

    Args:
        strategy: ``greedy`` (argmax action; a continuous action is the action head's
            prediction) or ``sample`` (discrete: softmax with ``temperature``; continuous: the
            prediction plus Gaussian noise of standard deviation ``action_noise``). Continuous
            actions are clipped to the action bounds. States are the state head's prediction
            (or the ``dynamics`` model's, see :class:`Imaginer`).
        temperature: softmax temperature of sampled discrete actions.
        action_noise: standard deviation of sampled continuous actions around the action
            head's prediction, the head read as a Gaussian (its squared-error loss is the
            Gaussian's negative log-likelihood up to scale). Each step's log-likelihood under
            that Gaussian ranks best-of-N candidates. Needed (> 0) to sample continuous actions.
        batch_size: rollouts decoded together.
        use_cache: KV-cached decoding (``False``: full re-forward per slot; same result).
        max_abs_state: a rollout whose state leaves ``[-max_abs_state, max_abs_state]`` (or
            becomes non-finite) is stopped and discarded as diverged.
        guidance: instruction guidance, the weight ``w`` of the instructed prediction against
            the one without words (classifier-free guidance): every action is chosen from
            ``uncond + w * (cond - uncond)`` (action means, or log-probabilities of discrete
            actions), where ``uncond`` continues the same rollout from a prompt with the empty
            instruction. 1 (default): the instructed prediction alone; above 1 the words weigh
            more than the rollout so far. Costs a second row per rollout; meant for modules
            fine-tuned with ``instruction_dropout`` (``GroundingDataModule``), which learn both.
        guidance_reference: what the words are contrasted with under guidance: ``empty`` (the
            empty instruction, classifier-free guidance) or ``nearest_seen`` (the training
            instruction closest in meaning, a negative prompt: ``w > 1`` then amplifies what
            the new words say beyond the nearest task the module has seen, e.g. "faster" in
            "run forward faster"; needs no ``instruction_dropout``). ``imaginebench imagine``
            finds that instruction with the sentence encoder
            (:class:`~imaginebench.imagination.references.NearestSeenInstruction`).
        stage_tasks: imagine a composition of trained tasks one stage at a time, each as its
            training task (:meth:`~imaginebench.envs.base.Task.as_stage_task`, judged on the
            imagined states). ``lm``: the LM is prompted with that task's trained words and
            sees only that task's entities; a new prompt opens when a stage is reached.
            ``both``: the state model too sees only them, the other stages' entities held
            where they are (with the LM's own state head, always so). ``off`` (default): the
            rollout's words and whole state. The stored rollout keeps the whole state and its
            own instruction. A hand-given decomposition: the module is never asked to split
            the instruction itself.
    """

    strategy: Strategy = "greedy"
    temperature: float = 1.0
    action_noise: float = 0.0
    batch_size: int = 64
    use_cache: bool = True
    max_abs_state: float = 100.0
    guidance: float = 1.0
    guidance_reference: GuidanceReference = "empty"
    stage_tasks: StageTasks = "off"

    def __post_init__(self) -> None:
        if self.strategy not in ("greedy", "sample"):
            raise ValueError(f"strategy must be 'greedy' or 'sample', got {self.strategy!r}")
        if self.temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")
        if not self.action_noise >= 0:
            raise ValueError(f"action_noise must be >= 0, got {self.action_noise}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        if not self.guidance >= 0:
            raise ValueError(f"guidance must be >= 0, got {self.guidance}")
        if self.stage_tasks not in ("off", "lm", "both"):
            raise ValueError(f"stage_tasks must be 'off', 'lm' or 'both', got {self.stage_tasks!r}")
        if self.guidance_reference not in ("empty", "nearest_seen"):
            raise ValueError(
                "guidance_reference must be 'empty' or 'nearest_seen', got "
                f"{self.guidance_reference!r}"
            )
        if self.guidance_reference != "empty" and self.guidance == 1.0:
            raise ValueError(
                f"guidance_reference={self.guidance_reference!r} needs guidance != 1 (at 1 the "
                "instructed prediction is used alone)"
            )


@dataclass
class ImaginedRollout:
    """One decoded rollout before rewards are attached."""

    spec: EpisodeSpec
    states: np.ndarray  # (T + 1, D)
    actions: np.ndarray  # (T,) or (T, A)
    success: bool
    diverged: bool
    illegal: bool = False  # stopped at a state that breaks the domain's rules
    log_likelihood: float = 0.0  # of the actions under the LM (0 for greedy continuous ones)
    redrawn: int = 0  # actions redrawn because their imagined next state was illegal/uncertain
    #: (T,) per step: log-likelihood of the action and (categorical state head) of the next
    #: state under the LM; zeros when the model gives none (greedy continuous actions,
    #: regression state head).
    step_log_likelihoods: np.ndarray = field(default_factory=lambda: np.zeros(0))
    #: stopped at a transition the confidence rule trusts less than its threshold
    uncertain: bool = False


class _Sequences:
    """The growing input of a batch of rollouts: a KV cache, or all embeddings so far."""

    def __init__(self, model: Any, batch: dict[str, Tensor], use_cache: bool) -> None:
        from transformers import DynamicCache

        self.model, self.use_cache = model, use_cache
        self.mask = batch["attention_mask"]
        self.positions = batch["position_ids"]
        embeds = model.embed(batch)
        self.cache = DynamicCache() if use_cache else None
        self.embeds = None if use_cache else embeds
        hidden, self.cache = model.hidden(
            embeds, self.mask, self.positions, self.cache, use_cache=use_cache
        )
        self.last = hidden[:, -1]

    def feed(self, embed: Tensor) -> Tensor:
        """Append one slot per row (``embed``: ``(B, H)``); the new last hidden state."""
        ones = torch.ones_like(self.mask[:, :1])
        self.mask = torch.cat([self.mask, ones], 1)
        new_position = self.positions[:, -1:] + 1
        self.positions = torch.cat([self.positions, new_position], 1)
        if self.use_cache:
            hidden, self.cache = self.model.hidden(
                embed[:, None], self.mask, new_position, self.cache, use_cache=True
            )
        else:
            self.embeds = torch.cat([self.embeds, embed[:, None]], 1)
            hidden, _ = self.model.hidden(self.embeds, self.mask, self.positions)
        self.last = hidden[:, -1]
        return self.last

    def mark(self) -> tuple[int, Tensor]:
        """The current length and last hidden state, to :meth:`rewind` to."""
        return self.mask.shape[1], self.last

    def rewind(self, mark: tuple[int, Tensor]) -> None:
        """Forget every slot fed since ``mark`` (same rows as then)."""
        length, last = mark
        extra = self.mask.shape[1] - length
        if extra > 0:
            self.mask, self.positions = self.mask[:, :length], self.positions[:, :length]
            if self.use_cache:
                self.cache.crop(-extra)
            else:
                self.embeds = self.embeds[:, :length]
        self.last = last

    def keep(self, rows: Tensor) -> None:
        """Keep ``rows``, in that order: drop finished rollouts, or repeat a row (a shared
        prompt)."""
        self.mask, self.positions, self.last = (
            self.mask[rows],
            self.positions[rows],
            self.last[rows],
        )
        if self.use_cache:
            self.cache.batch_select_indices(rows)
        else:
            self.embeds = self.embeds[rows]


class Imaginer:
    """Decodes imaginary rollouts with a fine-tuned :class:`GroundingModule`.

    Args:
        module: the fine-tuned grounding module (its model, tokenizer and prompts).
        decoding: decoding settings (:class:`DecodingConfig` or a dict of its fields).
        seed: seed of sampled decoding.
        integer_states: round every predicted state to integers before it is stored and fed
            back (grid domains such as BabyAI, whose states are cell coordinates and indices).
        legal: the domain's legality rule (``(N, D) states -> (N,) bool``, rules only, no
            simulation); a rollout stops at its first illegal state, flagged ``illegal``.
        illegal_retries: with ``legal`` and sampled actions, an action whose
            imagined next state breaks the rules is redrawn (the LM's cache rewound to before
            it) up to this many times before the rollout stops as illegal (or uncertain).
        dynamics: ``(states (B, D), actions) -> next states (B, D)``, a model of the domain's
            dynamics learned from real data (never the simulator); when given, it advances the
            state and the LM only chooses the actions (its state head's prediction is unused).
        dynamics_context: the domain's ``dynamics_context(task, states, actions) -> (T, K)``
            (:class:`~imaginebench.envs.Domain`); when given, ``dynamics`` and ``confidence``
            also receive each row's ``(B, K)`` context of the step, from its rollout so far.
        confidence: ``(states, actions, next states) -> (N,)`` trust in each transition (e.g.
            :meth:`~imaginebench.imagination.confidence.TransitionEnsemble.transition_confidence`);
            with ``min_confidence``, a rollout stops at its first transition trusted less,
            flagged ``uncertain`` (after the same redraws as an illegal state).
        min_confidence: that threshold.
        reference_of: under guidance, ``instruction -> the instruction it is contrasted
            with`` (``decoding.guidance_reference: nearest_seen``); ``None``: the empty one.
        lookahead: a :class:`~imaginebench.imagination.lookahead.Lookahead` that refines each
            continuous action by a short search in the state model towards the rollout's own
            task (needs ``dynamics``; see that module).
        journal: a :class:`~imaginebench.imagination.journal.Journal` that stores each decoded
            batch with the random state after it, and gives stored batches back instead of
            decoding them again (an interrupted run resumes where it stopped).
    """

    def __init__(
        self,
        module: Any,
        decoding: DecodingConfig | Mapping[str, Any] | None = None,
        seed: int = 0,
        integer_states: bool = False,
        legal: Callable[[np.ndarray], np.ndarray] | None = None,
        illegal_retries: int = 0,
        dynamics: Callable[..., np.ndarray] | None = None,
        journal: Journal | None = None,
        confidence: Callable[..., np.ndarray] | None = None,
        min_confidence: float | None = None,
        dynamics_context: Callable[[Any, np.ndarray, np.ndarray], np.ndarray] | None = None,
        reference_of: Callable[[str], str] | None = None,
        lookahead: Lookahead | None = None,
    ) -> None:
        self.decoding = as_config(decoding, DecodingConfig, "decoding") or DecodingConfig()
        if (reference_of is None) != (self.decoding.guidance_reference == "empty"):
            raise ValueError(
                "reference_of=... goes with decoding.guidance_reference other than 'empty' "
                "(what a rollout's words are contrasted with)"
            )
        self.reference_of = reference_of
        self.journal = journal
        self.batches_decoded = 0  # batch number in the journal, over every call of imagine()
        self.dynamics = dynamics
        self.module = module
        self.integer_states = integer_states
        self.legal = legal
        self.model = module.model
        self.builder = module.builder
        self.generator = torch.Generator().manual_seed(seed)
        spec = module.action_spec
        self.discrete = spec["type"] == "discrete"
        self.action_low = float(spec.get("low", -1.0))
        self.action_high = float(spec.get("high", 1.0))
        if illegal_retries < 0:
            raise ValueError(f"illegal_retries must be >= 0, got {illegal_retries}")
        if (min_confidence is None) != (confidence is None):
            raise ValueError("min_confidence and confidence=... go together")
        rule = legal is not None or confidence is not None
        if illegal_retries and (not rule or self.decoding.strategy != "sample"):
            raise ValueError(
                "illegal_retries redraws sampled actions under a legality or confidence rule: "
                "it needs legal=... or confidence=..., and decoding.strategy='sample'"
            )
        self.illegal_retries = illegal_retries
        self.confidence, self.min_confidence = confidence, min_confidence
        self.dynamics_context = dynamics_context
        self.guided = self.decoding.guidance != 1.0
        if lookahead is not None and (self.discrete or dynamics is None or illegal_retries):
            raise ValueError(
                "lookahead searches continuous actions in a learned state model: it needs "
                "continuous actions and dynamics=..., and no illegal_retries (its plans avoid "
                "illegal states themselves)"
            )
        self.lookahead = lookahead
        sampled_continuous = not self.discrete and self.decoding.strategy == "sample"
        if sampled_continuous and not self.decoding.action_noise:
            raise ValueError(
                "sampled continuous actions need decoding.action_noise > 0 (the standard "
                "deviation around the action head's prediction)"
            )

    @torch.no_grad()
    def imagine(
        self, specs: list[EpisodeSpec], horizon: int, progress: bool = False, start: int = 0
    ) -> list[ImaginedRollout]:
        """One rollout per episode spec, at most ``horizon`` steps each (input order kept).
        ``start`` is the step index of the initial states (to continue windowed rollouts)."""
        if horizon < 1:
            raise ValueError(f"horizon must be >= 1, got {horizon}")
        self.model.eval()
        size = self.decoding.batch_size
        out: list[ImaginedRollout] = []
        batches = range(0, len(specs), size)
        bar = tqdm(total=len(specs), desc="imagining", unit="rollout", disable=not progress)
        for first in batches:
            out += self._journaled_batch(specs[first : first + size], horizon, start)
            bar.update(len(specs[first : first + size]))
        bar.close()
        return out

    def _journaled_batch(
        self, specs: list[EpisodeSpec], horizon: int, start: int
    ) -> list[ImaginedRollout]:
        """:meth:`_batch`, or its rollouts and random state read back from the journal."""
        index, self.batches_decoded = self.batches_decoded, self.batches_decoded + 1
        stored = self.journal.load(index, specs) if self.journal is not None else None
        if stored is not None:
            rollouts, random_state = stored
            self.generator.set_state(random_state)
            return rollouts
        rollouts = self._batch(specs, horizon, start)
        if self.journal is not None:
            self.journal.save(index, rollouts, self.generator.get_state())
        return rollouts

    def _act(
        self,
        seq: _Sequences,
        state: Tensor,
        previous: Tensor | None,
        redo: Tensor | None = None,
        kept: list[Tensor] | None = None,
        refine: Callable[[np.ndarray], np.ndarray] | None = None,
    ) -> tuple[Tensor, Tensor, Tensor, list[Tensor]]:
        """Choose each row's action and feed it: the actions, the new hidden state, the
        actions' log-likelihood under the LM (zeros for greedy continuous ones) and the choice of
        each action word. ``state`` is the current state and ``previous`` the action before it
        in this prompt (the heads' context). With ``redo`` (``(B,)`` bool), only those rows
        draw anew; the others repeat their word choices ``kept``. ``refine`` maps the chosen
        ``(B, A)`` continuous actions to the ones fed (the lookahead)."""
        action, hidden = None, seq.last
        log_likelihood = torch.zeros(len(state), device=hidden.device)
        choices: list[Tensor] = []
        hidden_actions = self.model.hidden_action is not None
        paired_previous = None if previous is None or hidden_actions else self._paired(previous)
        for word in range(self.model.words_per_action):
            heads = self.model.with_context(hidden, self._paired(state), paired_previous)
            prediction = self._guide(self.model.action_logits(heads, word))
            choice = self._choose(prediction)
            if refine is not None:
                refined = refine(choice.float().cpu().numpy())
                choice = torch.as_tensor(refined, dtype=choice.dtype, device=choice.device)
            if redo is not None and kept is not None:
                redo_rows = redo.to(choice.device).view(-1, *[1] * (choice.dim() - 1))
                choice = torch.where(redo_rows, choice, kept[word])
            choices.append(choice)
            if self.discrete:
                log_probs = torch.log_softmax(prediction.float(), -1)
                log_likelihood += log_probs.gather(-1, choice[:, None]).squeeze(-1)
            elif self.decoding.strategy == "sample":
                log_likelihood += self._gaussian_log_likelihood(choice, prediction)
            if self.model.action_words is not None:
                part = choice * self.model.action_words.strides[word]
                action = part if action is None else action + part
            else:
                action = choice
            hidden = seq.feed(self._paired(self.model.action_input(action, word)))
        return action, hidden, log_likelihood, choices

    def _paired(self, rows: Tensor) -> Tensor:
        """Under guidance, ``rows`` for the instructed rows and again for their reference rows
        (the sequences hold both halves); else ``rows``."""
        return torch.cat([rows, rows]) if self.guided else rows

    def _instructed(self, rows: Tensor) -> Tensor:
        """The instructed half of paired rows (all of them without guidance)."""
        return rows[: len(rows) // 2] if self.guided else rows

    def _guide(self, prediction: Tensor) -> Tensor:
        """One prediction per rollout: the guided combination of its two rows, or as it is."""
        if not self.guided:
            return prediction
        if self.discrete:
            prediction = torch.log_softmax(prediction.float(), -1)
        instructed, reference = prediction.chunk(2)
        return reference + self.decoding.guidance * (instructed - reference)

    def _keep(self, seq: _Sequences, rows: Tensor) -> None:
        """Keep ``rows`` of the rollouts in ``seq`` (both halves under guidance)."""
        if self.guided:
            rows = torch.cat([rows, rows + len(seq.last) // 2])
        seq.keep(rows)

    def _step(
        self,
        seq: _Sequences,
        current: Tensor,
        previous: Tensor | None,
        redo: Tensor | None = None,
        kept: list[Tensor] | None = None,
        context_of: Callable[[np.ndarray], np.ndarray] | None = None,
        refine: Callable[[np.ndarray], np.ndarray] | None = None,
        in_view: Tensor | None = None,
    ) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, list[Tensor], np.ndarray | None]:
        """One imagined transition of every row: action, hidden state after it, next state,
        the action's log-likelihood, the next state's (zeros for a regression head), the
        action's word choices (see :meth:`_act`) and the step's dynamics context
        (``context_of(actions)``; ``None`` without one). ``refine``: see :meth:`_act`.
        ``in_view`` (``(B, D)`` bool, ``decoding.stage_tasks``): the entries the LM sees (and
        the state model, see :meth:`_model_view`); the others are zero to them, and held in the
        next state where the state model does not see them."""
        seen = current if in_view is None else current * in_view
        action, hidden, log_likelihood, choices = self._act(seq, seen, previous, redo, kept, refine)
        shown = None if self.model.hidden_action is not None else action
        heads = self.model.with_context(self._instructed(hidden), seen, shown)
        context = context_of(action.cpu().numpy()) if context_of is not None else None
        model_view = self._model_view(in_view)
        if self.dynamics is None:
            next_state = self.model.next_state(heads, seen)
        else:
            given = current if model_view is None else current * model_view
            inputs = (given.float().cpu().numpy(), action.cpu().numpy())
            predicted = (
                self.dynamics(*inputs) if context is None else self.dynamics(*inputs, context)
            )
            next_state = torch.as_tensor(predicted, dtype=current.dtype, device=current.device)
        if model_view is not None:
            next_state = torch.where(model_view, next_state, current)
        if self.integer_states:
            next_state = next_state.round()
        state_log_likelihood = self.model.state_log_likelihood(heads, next_state, current)
        return action, hidden, next_state, log_likelihood, state_log_likelihood, choices, context

    def _choose(self, prediction: Tensor) -> Tensor:
        if not self.discrete:
            if self.decoding.strategy == "sample":
                noise = torch.randn(prediction.shape, generator=self.generator)
                prediction = prediction + self.decoding.action_noise * noise.to(prediction)
            return prediction.clamp(self.action_low, self.action_high)
        if self.decoding.strategy == "greedy":
            return prediction.argmax(-1)
        probs = torch.softmax(prediction / self.decoding.temperature, -1)
        return (
            torch.multinomial(probs.cpu(), 1, generator=self.generator)
            .squeeze(1)
            .to(prediction.device)
        )

    def _gaussian_log_likelihood(self, action: Tensor, prediction: Tensor) -> Tensor:
        """Log-density of continuous actions under the Gaussian around the prediction (of the
        clipped action: a clipped draw counts as the bound's density, a ranking score)."""
        sigma = self.decoding.action_noise
        z = (action.float() - prediction.float()) / sigma
        return (-0.5 * z.square() - np.log(sigma) - 0.5 * np.log(2 * np.pi)).sum(-1)

    def _model_view(self, in_view: Tensor | None) -> Tensor | None:
        """The entries the state model sees under ``decoding.stage_tasks`` (``None``: all):
        the LM's with ``both`` or when the LM's own state head is the state model."""
        if in_view is None or (self.decoding.stage_tasks == "lm" and self.dynamics is not None):
            return None
        return in_view

    def _as_stage_tasks(
        self, specs: list[EpisodeSpec], histories: list[list[np.ndarray]]
    ) -> tuple[list[str], np.ndarray | None]:
        """Each rollout's words, and under ``decoding.stage_tasks`` the ``(B, D)`` entries in
        view (:meth:`Task.as_stage_task`, ``None`` without it: everything)."""
        if self.decoding.stage_tasks == "off":
            return [spec.instruction for spec in specs], None
        staged = [
            spec.task.as_stage_task(np.stack(history), spec.instruction)
            for spec, history in zip(specs, histories)
        ]
        return [words for words, _ in staged], np.stack([view for _, view in staged])

    def _prompt(
        self, instructions: list[str], states: list[np.ndarray], start: int, device: Any
    ) -> _Sequences:
        """Encode the generation prompts of ``instructions`` ending in their ``states`` at
        step ``start``.

        Rows with the same prompt (best-of-N candidates of one episode) share one prompt pass:
        it runs once per distinct prompt and its cache is copied to each of their rows (the
        prompt pass dominated the cost of short rollouts).
        """
        if self.guided:  # then the same rollouts told their reference (default: no words)
            reference = self.reference_of or (lambda _: NO_INSTRUCTION)
            instructions = [*instructions, *(reference(words) for words in instructions)]
            states = [*states, *states]
        index_of: dict[tuple[str, bytes], int] = {}
        distinct: list[int] = []  # the first row of each distinct prompt
        inverse: list[int] = []  # each row's distinct prompt
        for row, (instruction, state) in enumerate(zip(instructions, states)):
            key = (instruction, np.asarray(state, dtype=np.float32).tobytes())
            if key not in index_of:
                index_of[key] = len(distinct)
                distinct.append(row)
            inverse.append(index_of[key])
        items = [
            self.builder.rollout_prompt(instructions[row], states[row], start) for row in distinct
        ]
        batch = to_device(self.builder.collate(items, "left"), device)
        sequences = _Sequences(self.model, batch, self.decoding.use_cache)
        if len(distinct) < len(instructions):
            sequences.keep(torch.as_tensor(inverse, device=device))
        return sequences

    def _batch(self, specs: list[EpisodeSpec], horizon: int, start: int) -> list[ImaginedRollout]:
        device = next(self.model.parameters()).device
        window = self.builder.window
        n = len(specs)
        states = [[np.asarray(s.initial_state, dtype=np.float32)] for s in specs]
        prompted, view = self._as_stage_tasks(specs, states)  # the words, the entries in view
        in_view = None if view is None else torch.as_tensor(view, device=device)
        first = np.stack([s[0] for s in states]) * (1 if view is None else view)
        seq = self._prompt(prompted, list(first), start, device)
        actions: list[list[np.ndarray]] = [[] for _ in specs]
        success = [False] * n
        diverged = [False] * n
        illegal = [False] * n
        uncertain = [False] * n
        log_likelihood = np.zeros(n)
        step_log_likelihoods: list[list[float]] = [[] for _ in specs]
        redrawn = np.zeros(n, dtype=np.int64)
        active = torch.arange(n)  # original indices of the rows still in the batch
        current = torch.as_tensor(np.stack([s[0] for s in states]), device=device)
        previous: Tensor | None = None  # the last action in the current prompt
        observation_rules = self._observation_rules(specs)
        if self.lookahead is not None:
            self.lookahead.reset()
        for t in range(horizon):
            before = seq.mark()
            context_of = None
            if self.dynamics_context is not None:
                context_of = self._context_of(specs, states, actions, active.tolist())
            refine = None
            if self.lookahead is not None:
                refine = self._refine_of(specs, states, actions, active.tolist())
            action, hidden, next_state, action_ll, state_ll, choices, context = self._step(
                seq, current, previous, context_of=context_of, refine=refine, in_view=in_view
            )
            values = next_state.cpu().numpy()
            legal, trusted = self._acceptable(
                current, action, values, context, self._model_view(in_view)
            )
            for _ in range(self.illegal_retries):
                if (legal & trusted).all():
                    break
                redo = torch.as_tensor(~(legal & trusted))
                for row in np.flatnonzero(~(legal & trusted)):
                    redrawn[int(active[row])] += 1
                seq.rewind(before)
                action, hidden, next_state, action_ll, state_ll, choices, context = self._step(
                    seq, current, previous, redo, choices, context_of, in_view=in_view
                )
                values = next_state.cpu().numpy()
                legal, trusted = self._acceptable(
                    current, action, values, context, self._model_view(in_view)
                )
            if observation_rules:
                values = self._observed(specs, states, active.tolist(), values)
                next_state = torch.as_tensor(values, dtype=next_state.dtype, device=device)
            chosen = action.cpu().numpy()
            action_ll_values = action_ll.cpu().numpy()
            step_ll = (action_ll + state_ll).cpu().numpy()
            finished = []
            for row, index in enumerate(active.tolist()):
                actions[index].append(chosen[row])
                states[index].append(values[row])
                log_likelihood[index] += action_ll_values[row]
                step_log_likelihoods[index].append(float(step_ll[row]))
                if not np.all(np.isfinite(values[row])) or np.abs(values[row]).max() > (
                    self.decoding.max_abs_state
                ):
                    diverged[index] = True
                elif not legal[row]:
                    illegal[index] = True
                elif not trusted[row]:
                    uncertain[index] = True
                elif specs[index].task.success(np.stack(states[index]))[-1]:
                    success[index] = True
                else:
                    continue
                finished.append(row)
            if len(finished) == len(active) or t == horizon - 1:
                break
            reprompt = window is not None and (t + 1) % window == 0  # the window is full
            if in_view is not None:  # a stage reached: its task from now on
                running = [i for row, i in enumerate(active.tolist()) if row not in finished]
                words, view = self._as_stage_tasks(
                    [specs[i] for i in running], [states[i] for i in running]
                )
                for index, now in zip(running, words):
                    reprompt |= now != prompted[index]
                    prompted[index] = now
                in_view = torch.as_tensor(view, device=device)  # (the running rows')
            if finished:
                rows = torch.as_tensor(
                    sorted(set(range(len(active))) - set(finished)), dtype=torch.long
                )
                active, next_state = active[rows], next_state[rows]
                action = action[rows.to(action.device)]
                if not reprompt:  # a new prompt replaces the cache anyway
                    self._keep(seq, rows.to(device))
            shown = next_state if in_view is None else next_state * in_view  # the LM's view
            if reprompt:
                words = [prompted[i] for i in active.tolist()]
                seq = self._prompt(words, list(shown.cpu().numpy()), start + t + 1, device)
                previous = None
            else:
                seq.feed(self._paired(self.model.embed_states(shown)))
                previous = action
            current = next_state
        return [
            ImaginedRollout(
                spec,
                np.stack(states[i]).astype(np.float32),
                np.stack(actions[i]),
                success[i],
                diverged[i],
                illegal[i],
                float(log_likelihood[i]),
                int(redrawn[i]),
                np.asarray(step_log_likelihoods[i], dtype=np.float64),
                uncertain[i],
            )
            for i, spec in enumerate(specs)
        ]

    @staticmethod
    def _observation_rules(specs: list[EpisodeSpec]) -> bool:
        """Whether any task shows its states other than as the state model gives them."""
        return any(type(s.task).observed is not Task.observed for s in specs)

    @staticmethod
    def _observed(
        specs: list[EpisodeSpec],
        states: list[list[np.ndarray]],
        rows: list[int],
        values: np.ndarray,
    ) -> np.ndarray:
        """``values`` (the imagined next states of the active ``rows``) as each task's
        environment would show them after its history (:meth:`Task.observed`)."""
        shown = values.copy()
        for row, index in enumerate(rows):
            history = np.stack([*states[index], values[row]])
            shown[row] = specs[index].task.observed(history)
        return shown

    def _acceptable(
        self,
        current: Tensor,
        action: Tensor,
        next_states: np.ndarray,
        context: Any = None,
        in_view: Tensor | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(B,)`` bool twice: which imagined next states are legal, and which transitions the
        confidence rule trusts (all, without the rule), judged on the entries ``in_view`` as
        the state model saw them."""
        everyone = np.ones(len(next_states), dtype=bool)
        legal = self.legal(next_states) if self.legal is not None else everyone
        if self.confidence is None:
            return legal, everyone
        before = current.float().cpu().numpy()
        if in_view is not None:
            view = in_view.cpu().numpy()
            before, next_states = before * view, next_states * view
        inputs = (before, action.cpu().numpy(), next_states)
        trust = self.confidence(*inputs) if context is None else self.confidence(*inputs, context)
        return legal, np.asarray(trust) >= self.min_confidence

    def _refine_of(
        self,
        specs: list[EpisodeSpec],
        states: list[list[np.ndarray]],
        actions: list[list[np.ndarray]],
        rows: list[int],
    ) -> Callable[[np.ndarray], np.ndarray]:
        """Given the LM's ``(B, A)`` actions of the step, the lookahead's (each active row's
        plan kept under its rollout's index)."""
        assert self.lookahead is not None
        lookahead = self.lookahead

        def refine(proposed: np.ndarray) -> np.ndarray:
            tasks = [specs[index].task for index in rows]
            histories = [np.stack(states[index]) for index in rows]
            taken = [_stacked(actions[index], proposed.shape[1:]) for index in rows]
            return lookahead.refine(rows, tasks, histories, proposed, self.generator, taken)

        return refine

    def _context_of(
        self,
        specs: list[EpisodeSpec],
        states: list[list[np.ndarray]],
        actions: list[list[np.ndarray]],
        rows: list[int],
    ) -> Callable[[np.ndarray], np.ndarray]:
        """Given the step's ``(B, ...)`` actions, each active row's dynamics context of the
        step: the domain's ``dynamics_context`` of its rollout so far, last row."""

        def context_of(step_actions: np.ndarray) -> np.ndarray:
            out = []
            for row, index in enumerate(rows):
                taken = np.stack([*actions[index], step_actions[row]])
                history = np.stack(states[index])
                out.append(self.dynamics_context(specs[index].task, history, taken)[-1])
            return np.stack(out)

        return context_of


def to_episode(
    rollout: ImaginedRollout,
    rewards: np.ndarray,
    confidence: dict[str, np.ndarray] | None = None,
) -> Episode:
    """An imaginary :class:`Episode` (terminated on success, else truncated) with the given
    confidence per step (source name -> ``(T,)``)."""
    spec = rollout.spec
    return Episode(
        states=rollout.states,
        actions=rollout.actions,
        rewards=np.asarray(rewards, dtype=np.float32),
        terminated=rollout.success,
        truncated=not rollout.success,
        instruction=spec.instruction,
        task_spec=spec.task.spec(),
        level=spec.level,
        source="imaginary",
        success=rollout.success,
        confidence=dict(confidence or {}),
    )


def _stacked(rows: list[np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
    """``(len(rows), *shape)`` float32: ``rows`` stacked (none: an empty array of that shape)."""
    if not rows:
        return np.zeros((0, *shape), dtype=np.float32)
    return np.stack(rows).astype(np.float32)
