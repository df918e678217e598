"""GroundedLM: a causal language model with numeric state/action slots (KALM's architecture).

States enter through a linear adapter and actions through an embedding (discrete) or a linear
adapter (continuous), one position each, into the LM's hidden size; heads read states and
actions back from the hidden state of the preceding position. Text uses the LM's own embeddings
and output head. States are standardised with the real data's statistics on both sides.

For grid domains whose states are small integers (BabyAI: cell coordinates, colour and object
indices in ``0..7``) ``state_classes=C`` makes the state head categorical: ``C`` logits per
entry, trained with cross-entropy and decoded by argmax, so an imagined state is always a
valid integer vector rather than a rounded regression that can land between two cells.

With ``action_words`` a discrete action is spelled as words of the LM's vocabulary, one
position per word, read and written through the LM's own embeddings
(:mod:`~imaginebench.modules.grounding.action_words`) instead of a fresh embedding and head.

With ``context_hidden`` the state and action heads also see, through a small MLP added to the
hidden state, the numbers known at their position: the latest state and the latest complete
action (:func:`~imaginebench.modules.grounding.sequences.context_of`). The LM has them in its
context anyway, as single slot embeddings it must learn to route to the head; the skip hands
them over directly, so the head can learn, e.g., where a push stops at a wall from the
previous state's coordinates while the LM supplies what the instruction and the action mean.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from imaginebench.modules.dynamics import SPREAD_FLOOR, standardize_seen
from imaginebench.modules.grounding.action_words import ActionWords
from imaginebench.modules.grounding.sequences import (
    ACTION,
    ACTION_TARGET,
    HIDDEN_ACTION,
    STATE,
    STATE_TARGET,
    TOKEN_TARGET,
)
from imaginebench.modules.grounding.unpadded import ATTENTION_NAME, Segments


def masked_mean(values: Tensor, mask: Tensor) -> Tensor:
    """Mean of ``values[mask]``; zero (still attached to the graph) when the mask is empty."""
    if mask.any():
        return values[mask].mean()
    return values.sum() * 0.0


_CONTEXT_DOWN = 64  # width of the hidden state's projection fed to the context MLP


def _packed(attention_mask: Tensor, position_ids: Tensor) -> bool:
    """Whether a row holds several sequences (more than one real position numbered 0)."""
    starts = (position_ids == 0) & attention_mask.bool()
    return bool(starts.sum(1).gt(1).any())


def _known(flag: Tensor | None, value: Tensor | None, shape: torch.Size, like: Tensor) -> Tensor:
    """Float ``shape`` mask: ``flag`` if given, else 1 where ``value`` exists at all."""
    if flag is not None:
        return flag.to(like.dtype)
    return like.new_full(shape, 0.0 if value is None else 1.0)


class GroundedLM(nn.Module):
    """The LM plus numeric adapters and heads.

    Args:
        lm: a Hugging Face causal LM (possibly with LoRA layers injected in place).
        state_dim: size of a state vector.
        action_spec: the dataset's action spec (discrete ``n`` or continuous ``shape``).
        residual_states: predict a state as the state it follows plus a predicted change, in
            units of the real data's per-entry spread of one transition's change (states
            with nothing before them, like the first, are predicted absolutely). With a
            categorical head: add a learned per-entry bonus to the logit of the entry's previous
            class (a copy prior: most entries of a grid state do not change in one step).
        state_adapter_hidden: hidden width of a two-layer (GELU) state adapter; ``0`` gives
            KALM's single linear layer. The MLP can form non-linear features of a state (e.g.
            relative positions) before the LM sees it.
        state_classes: states are integers in ``[0, state_classes)``: a categorical state
            head (``None``: regression).
        action_words: discrete actions spelled in the LM's words (``None``: an action
            embedding and a linear head over action indices).
        context_hidden: width of the context MLP (0: none).
        hidden_actions: generation sequences' action slots (``HIDDEN_ACTION``) enter as one
            learned vector instead of their values, so the LM cannot copy its previous action
            (see :meth:`action_input`).
        lora_autocast: with bfloat16 LM weights, run the LM body under bfloat16 autocast, so
            that the LoRA products compute in bfloat16 too (their weights, gradients and
            optimizer state stay float32) instead of copying every layer's input to float32
            and its output back, and add each scaled update in one ``addmm``
            (:mod:`~imaginebench.modules.grounding.lora_autocast`); ignored with float32
            weights.
    """

    def __init__(
        self,
        lm: nn.Module,
        state_dim: int,
        action_spec: dict[str, Any],
        residual_states: bool,
        state_adapter_hidden: int = 0,
        state_classes: int | None = None,
        action_words: ActionWords | None = None,
        context_hidden: int = 0,
        hidden_actions: bool = False,
        lora_autocast: bool = False,
    ) -> None:
        super().__init__()
        if context_hidden < 0:
            raise ValueError(f"context_hidden must be >= 0, got {context_hidden}")
        if state_classes is not None and state_classes < 2:
            raise ValueError(f"state_classes must be >= 2 or None, got {state_classes}")
        self.lm = lm
        # bfloat16 LoRA products beside bfloat16 weights: no float32 copy of every activation
        self.lora_autocast = lora_autocast and self.lm_dtype == torch.bfloat16
        if self.lora_autocast:
            from imaginebench.modules.grounding.lora_autocast import compute_lora_under_autocast

            compute_lora_under_autocast(lm)
        self.unpadded = getattr(lm.config, "_attn_implementation", None) == ATTENTION_NAME
        self.state_dim = state_dim
        self.state_classes = state_classes
        self.discrete = action_spec["type"] == "discrete"
        self.residual_states = residual_states
        hidden = int(lm.get_input_embeddings().embedding_dim)
        self.hidden_size = hidden
        if state_adapter_hidden > 0:
            self.state_in: nn.Module = nn.Sequential(
                nn.Linear(state_dim, state_adapter_hidden),
                nn.GELU(),
                nn.Linear(state_adapter_hidden, hidden),
            )
        else:
            self.state_in = nn.Linear(state_dim, hidden)
        self.action_words = action_words
        if action_words is not None:
            self.action_in: nn.Module = nn.Identity()  # the words' own embeddings
            self.action_out: nn.Module = nn.Identity()
        elif self.discrete:
            self.action_in = nn.Embedding(int(action_spec["n"]), hidden)
            self.action_out = nn.Linear(hidden, int(action_spec["n"]))
        else:
            action_dim = int(torch.tensor(action_spec["shape"]).prod())
            self.action_in = nn.Linear(action_dim, hidden)
            self.action_out = nn.Linear(hidden, action_dim)
        self.state_out = nn.Linear(hidden, state_dim * (state_classes or 1))
        # exp(3) / (exp(3) + 7) ~ 0.74: at the start an entry keeps its class with ~3/4 chance
        self.copy_bonus = (
            nn.Parameter(torch.full((state_dim,), 3.0))
            if state_classes is not None and residual_states
            else None
        )
        for adapter in (self.state_in, self.action_in, self.action_out, self.state_out):
            for layer in adapter.modules():
                if isinstance(layer, (nn.Linear, nn.Embedding)):
                    nn.init.normal_(layer.weight, std=0.02)
                    if getattr(layer, "bias", None) is not None:
                        nn.init.zeros_(layer.bias)
        # Slot inputs start at the scale of the LM's own token embeddings, so the LM sees them
        # as clearly as text (with the usual 0.02 they start several times weaker).
        token_rms = float(lm.get_input_embeddings().weight.detach().float().pow(2).mean().sqrt())
        last_state_layer = (
            self.state_in[-1] if isinstance(self.state_in, nn.Sequential) else (self.state_in)
        )
        for layer in (last_state_layer, self.action_in):
            if hasattr(layer, "weight"):
                nn.init.normal_(layer.weight, std=token_rms)
        self.hidden_action = (
            nn.Parameter(torch.randn(hidden) * token_rms) if hidden_actions else None
        )
        self.action_features = (
            int(action_spec["n"])
            if self.discrete
            else int(torch.tensor(action_spec["shape"]).prod())
        )
        self.context: nn.Module | None = None
        if context_hidden > 0:
            features = _CONTEXT_DOWN + state_dim + self.action_features + 2
            self.context_down = nn.Linear(hidden, _CONTEXT_DOWN)
            self.context = nn.Sequential(
                nn.Linear(features, context_hidden),
                nn.GELU(),
                nn.Linear(context_hidden, context_hidden),
                nn.GELU(),
                nn.Linear(context_hidden, hidden),
            )
            nn.init.zeros_(self.context[-1].weight)  # starts as the plain hidden state
            nn.init.zeros_(self.context[-1].bias)
        self.register_buffer("state_mean", torch.zeros(state_dim))
        self.register_buffer("state_std", torch.ones(state_dim))
        self.register_buffer("change_std", torch.ones(state_dim))

    # -- pieces -------------------------------------------------------------------------------
    @property
    def lm_dtype(self) -> torch.dtype:
        return self.lm.get_input_embeddings().weight.dtype

    def fit_statistics(self, states: Tensor, next_states: Tensor) -> None:
        """Standardise with the real data: states by their mean and spread, and (residual
        states) changes by the spread of one transition's change, per entry. A push moves one
        CLEVR ball by ~0.22 while positions spread ~0.5: measured in units of the state's
        spread, the change is a small target whose error barely registers in the loss, and the
        head learned to predict a quarter of it; in units of the change's spread it is ~2."""
        self.state_mean.copy_(states.mean(0))
        self.state_std.copy_(states.std(0).clamp_min(SPREAD_FLOOR))
        self.change_std.copy_((next_states - states).std(0).clamp_min(SPREAD_FLOOR))

    def normalize(self, state: Tensor) -> Tensor:
        """Standardised states; an entry that never varied in the real data (spread at most
        :data:`~imaginebench.modules.dynamics.SPREAD_FLOOR`) is given as its mean, 0, whatever
        its value: the model learned nothing of it, and a value it never saw (Meta-World's
        wall in the novel tasks) would otherwise enter hundreds of spreads away."""
        return standardize_seen(state, self.state_mean, self.state_std)

    def denormalize(self, state: Tensor) -> Tensor:
        return state * self.state_std + self.state_mean

    def embed_states(self, state: Tensor) -> Tensor:
        return self.state_in(self.normalize(state))

    def embed_actions(self, action: Tensor, word: Tensor | int = 0) -> Tensor:
        """Input embedding of an action (with ``action_words``: of its word ``word``)."""
        if self.action_words is not None:
            table = self.lm.get_input_embeddings().weight
            return self.action_words.embed(table, action, word)
        return self.action_in(action if self.discrete else action.float())

    def action_input(self, action: Tensor, word: Tensor | int = 0) -> Tensor:
        """What a generated action slot feeds the LM: its embedding, or with
        ``hidden_actions`` the learned hidden-action vector (its value is not shown)."""
        if self.hidden_action is None:
            return self.embed_actions(action, word)
        return self.hidden_action.float().expand(len(action), -1)

    def embed(self, batch: dict[str, Tensor]) -> Tensor:
        """Input embeddings: token embeddings with slot rows replaced by the numbers'."""
        tokens = self.lm.get_input_embeddings()(batch["input_ids"]).float()
        kind = batch["kind"].unsqueeze(-1)
        states = self.embed_states(batch["state"])
        actions = self.embed_actions(batch["action"], batch["word"])
        out = torch.where(kind == STATE, states, torch.where(kind == ACTION, actions, tokens))
        if self.hidden_action is not None:
            out = torch.where(kind == HIDDEN_ACTION, self.hidden_action.float(), out)
        elif bool((kind == HIDDEN_ACTION).any()):
            raise ValueError("hidden action slots need a model built with hidden_actions=True")
        return out

    def with_context(
        self,
        hidden: Tensor,
        state: Tensor | None,
        action: Tensor | None,
        has_state: Tensor | None = None,
        has_action: Tensor | None = None,
    ) -> Tensor:
        """What the state and action heads read: ``hidden`` plus the context MLP's view of the
        latest state and complete action (``None`` or ``has_*`` False: not known yet).
        Unchanged without ``context_hidden``."""
        if self.context is None:
            return hidden
        shape = hidden.shape[:-1]
        state_known = _known(has_state, state, shape, hidden)
        action_known = _known(has_action, action, shape, hidden)
        state_part = (
            self.normalize(state) * state_known[..., None]
            if state is not None
            else hidden.new_zeros(*shape, self.state_dim)
        )
        if action is None:
            action_part = hidden.new_zeros(*shape, self.action_features)
        elif self.discrete:
            action_part = F.one_hot(action.long(), self.action_features).to(hidden.dtype)
        else:
            action_part = action.to(hidden.dtype).flatten(len(shape))
        features = torch.cat(
            [
                self.context_down(hidden),
                state_part,
                action_part * action_known[..., None],
                state_known[..., None],
                action_known[..., None],
            ],
            -1,
        )
        return hidden + self.context(features)

    def batch_context(self, hidden: Tensor, batch: dict[str, Tensor]) -> Tensor:
        """:meth:`with_context` for the positions ``[:-1]`` of a collated batch."""
        if self.context is None:
            return hidden
        return self.with_context(
            hidden,
            batch["context_state"][:, :-1],
            batch["context_action"][:, :-1],
            batch["has_context_state"][:, :-1],
            batch["has_context_action"][:, :-1],
        )

    def hidden(
        self,
        embeds: Tensor,
        attention_mask: Tensor | None,
        position_ids: Tensor,
        cache: Any = None,
        use_cache: bool = False,
    ) -> tuple[Tensor, Any]:
        """Final hidden states (float32) of the LM body for ``embeds`` (and the KV cache).

        Packed rows (several sequences numbered from 0 in a row; :meth:`SequenceBuilder.collate`
        with ``pack``) are passed without the mask, so that transformers' packed format keeps
        each sequence attending within itself; the padding after a row's last sequence is a
        sequence of its own. With attention ``unpadded`` and no cache, the body computes the
        real positions alone (:mod:`~imaginebench.modules.grounding.unpadded`) and the padding
        slots' hidden states are zeros."""
        if self.unpadded and cache is None and not use_cache:
            return self._hidden_of_real_positions(embeds, attention_mask, position_ids), None
        if cache is None and (bool(attention_mask.all()) or _packed(attention_mask, position_ids)):
            attention_mask = None
        with torch.autocast(embeds.device.type, torch.bfloat16, enabled=self.lora_autocast):
            out = self.lm.base_model(
                inputs_embeds=embeds.to(self.lm_dtype),
                attention_mask=attention_mask,
                position_ids=position_ids,
                past_key_values=cache,
                use_cache=use_cache,
            )
        return out.last_hidden_state.float(), out.past_key_values

    def _hidden_of_real_positions(
        self, embeds: Tensor, attention_mask: Tensor, position_ids: Tensor
    ) -> Tensor:
        segments = Segments.of(attention_mask, position_ids, self.lm_dtype)
        flat = embeds.flatten(0, 1).index_select(0, segments.real)
        positions = position_ids.flatten()[segments.real]
        with torch.autocast(embeds.device.type, torch.bfloat16, enabled=self.lora_autocast):
            out = self.lm.base_model(
                inputs_embeds=flat[None].to(self.lm_dtype),
                position_ids=positions[None],
                segments=segments,
            )
        hidden = out.last_hidden_state[0].float()
        full = hidden.new_zeros(embeds.shape[0] * embeds.shape[1], hidden.shape[-1])
        return full.index_copy(0, segments.real, hidden).view(*embeds.shape[:2], -1)

    def state_logits(
        self, hidden: Tensor, base: Tensor | None = None, has_base: Tensor | None = None
    ) -> Tensor:
        """``(..., state_dim, state_classes)`` logits of a categorical state head; with the
        copy prior, ``base`` (the previous state, where ``has_base``) gets its bonus."""
        logits = self.state_out(hidden).unflatten(-1, (self.state_dim, self.state_classes))
        if self.copy_bonus is None or base is None:
            return logits
        previous = F.one_hot(self._classes(base), self.state_classes).to(logits.dtype)
        if has_base is not None:
            previous = previous * has_base[..., None, None].to(logits.dtype)
        return logits + self.copy_bonus[:, None] * previous

    def _classes(self, states: Tensor) -> Tensor:
        return states.round().long().clamp(0, self.state_classes - 1)

    def next_state(self, hidden: Tensor, base: Tensor | None) -> Tensor:
        """Predicted state (data units) from the hidden state before its slot."""
        if self.state_classes is not None:
            return self.state_logits(hidden, base).argmax(-1).float()
        change = self.state_out(hidden)
        if base is None or not self.residual_states:
            return self.denormalize(change)
        return base + change * self.change_std

    @property
    def has_likelihood(self) -> bool:
        """Whether a step has a likelihood under the model: its action is discrete or its
        state head categorical (a regression head's prediction has none)."""
        return self.discrete or self.state_classes is not None

    def state_log_likelihood(
        self, hidden: Tensor, state: Tensor, base: Tensor | None, has_base: Tensor | None = None
    ) -> Tensor:
        """Log-likelihood of ``state`` under a categorical state head read from ``hidden``
        (its entries' classes, summed over entries); zeros for a regression head."""
        if self.state_classes is None:
            return hidden.new_zeros(hidden.shape[:-1])
        log_probs = torch.log_softmax(self.state_logits(hidden, base, has_base).float(), -1)
        classes = self._classes(state)[..., None]
        return log_probs.gather(-1, classes).squeeze(-1).sum(-1)

    @torch.no_grad()
    def target_log_likelihoods(self, batch: dict[str, Tensor]) -> Tensor:
        """``(B, L - 1)``: the log-likelihood of each position's supervised target under
        teacher forcing (position ``p`` predicts the item at ``p + 1``): a discrete action
        (or word of one), a state under a categorical head; zero elsewhere (text, regression
        targets, padding)."""
        hidden, _ = self.hidden(self.embed(batch), batch["attention_mask"], batch["position_ids"])
        heads = self.batch_context(hidden[:, :-1], batch)
        target = batch["target"][:, 1:]
        out = heads.new_zeros(target.shape)
        actions = batch["action"][:, 1:]
        mask = target == ACTION_TARGET
        if self.discrete and mask.any():
            if self.action_words is not None:
                word = batch["word"][:, 1:][mask]
                table = self.lm.get_output_embeddings().weight
                logits = self.action_words.all_logits(table, heads[mask], word)
                chosen = self.action_words.target(actions[mask], word)
            else:
                logits, chosen = self.action_out(heads[mask]), actions[mask]
            log_probs = torch.log_softmax(logits.float(), -1)
            out[mask] = log_probs.gather(-1, chosen[:, None]).squeeze(-1)
        mask = target == STATE_TARGET
        if self.state_classes is not None and mask.any():
            out[mask] = self.state_log_likelihood(
                heads[mask],
                batch["state"][:, 1:][mask],
                batch["base"][:, 1:][mask],
                batch["has_base"][:, 1:][mask],
            )
        return out

    def action_logits(self, hidden: Tensor, word: int = 0) -> Tensor:
        """Action logits (discrete) or the predicted action (continuous); with
        ``action_words``, the logits of the action's word ``word``."""
        if self.action_words is not None:
            table = self.lm.get_output_embeddings().weight
            return self.action_words.logits(table, hidden, word)
        return self.action_out(hidden)

    @property
    def words_per_action(self) -> int:
        return 1 if self.action_words is None else self.action_words.count

    def token_logits(self, hidden: Tensor) -> Tensor:
        head = self.lm.get_output_embeddings()
        return head(hidden.to(head.weight.dtype)).float()

    # -- training -----------------------------------------------------------------------------
    def losses(self, batch: dict[str, Tensor]) -> dict[str, Tensor]:
        """Masked state MSE (standardised units), action CE/MSE and token CE of one batch."""
        hidden, _ = self.hidden(self.embed(batch), batch["attention_mask"], batch["position_ids"])
        h = hidden[:, :-1]
        heads = self.batch_context(h, batch)  # what the state and action heads read
        target = batch["target"][:, 1:]

        state_mask = target == STATE_TARGET
        out = self._state_losses(heads, batch, state_mask)

        action_mask = target == ACTION_TARGET
        actions = batch["action"][:, 1:]
        if self.action_words is not None:
            out.update(self._word_losses(heads, actions, batch["word"][:, 1:], action_mask))
        elif self.discrete:
            prediction = self.action_out(heads)
            per_position = F.cross_entropy(
                prediction.flatten(0, 1), actions.flatten(), reduction="none"
            ).view_as(actions)
            out["action_ce"] = masked_mean(per_position, action_mask)
            with torch.no_grad():
                hit = (prediction.argmax(-1) == actions).float()
                out["action_accuracy"] = masked_mean(hit, action_mask)
        else:
            prediction = self.action_out(heads)
            out["action_mse"] = masked_mean((prediction - actions).pow(2).mean(-1), action_mask)

        token_mask = target == TOKEN_TARGET
        if token_mask.any():
            logits = self.token_logits(h[token_mask])
            out["token_ce"] = F.cross_entropy(logits, batch["input_ids"][:, 1:][token_mask])
        else:
            out["token_ce"] = h.sum() * 0.0
        return out

    def _word_losses(
        self, h: Tensor, actions: Tensor, word: Tensor, mask: Tensor
    ) -> dict[str, Tensor]:
        """Action CE (the action's negative log-likelihood: the sum over its words) and
        accuracy (every word right) of an action spelled in words."""
        words = self.action_words
        if not mask.any():
            zero = h.sum() * 0.0
            return {"action_ce": zero, "action_accuracy": zero.detach()} | {
                f"action_ce_word{k}": zero.detach() for k in range(words.count)
            }
        position, action = word[mask], actions[mask]
        table = self.lm.get_output_embeddings().weight
        logits = words.all_logits(table, h[mask], position)
        target = words.target(action, position)
        per_word = F.cross_entropy(logits, target, reduction="none")
        # Row-major masking keeps an action's words consecutive: (actions, words per action).
        per_action = per_word.view(-1, words.count)
        out = {"action_ce": per_action.sum(-1).mean()}
        with torch.no_grad():
            right = (logits.argmax(-1) == target).view(-1, words.count)
            out["action_accuracy"] = right.all(-1).float().mean()
            for k in range(words.count):  # which word is hard to learn (e.g. colour vs direction)
                out[f"action_ce_word{k}"] = per_action[:, k].mean().detach()
        return out

    def _state_losses(
        self, h: Tensor, batch: dict[str, Tensor], state_mask: Tensor
    ) -> dict[str, Tensor]:
        """``state_mse`` (standardised units) or, with a categorical head, ``state_ce`` (mean
        over entries), plus the mean absolute error in data units."""
        states = batch["state"][:, 1:]
        if self.state_classes is not None:
            logits = self.state_logits(h, batch["base"][:, 1:], batch["has_base"][:, 1:])
            classes = self._classes(states)
            per_entry = F.cross_entropy(logits.flatten(0, 2), classes.flatten(), reduction="none")
            out = {"state_ce": masked_mean(per_entry.view_as(classes).mean(-1), state_mask)}
            predicted = logits.detach().argmax(-1).float()
        else:
            # residual targets in units of the change's spread, absolute ones of the state's
            change = self.state_out(h)
            base = batch["base"][:, 1:]
            use_base = batch["has_base"][:, 1:].unsqueeze(-1) & self.residual_states
            target = torch.where(
                use_base, (states - base) / self.change_std, self.normalize(states)
            )
            squared = (change - target).pow(2).mean(-1)
            out = {"state_mse": masked_mean(squared, state_mask)}
            predicted = torch.where(
                use_base,
                base + change.detach() * self.change_std,
                self.denormalize(change.detach()),
            )
        with torch.no_grad():  # error in data units, for humans
            out["state_mae"] = masked_mean((predicted - states).abs().mean(-1), state_mask)
        return out
