"""Template of ``Transformer.reset_parameters`` (archcalc.codegen.init fills it): one method per
init scheme of a spec (normal, t5, xavier), as transformers' ``_init_weights`` for the family does
it."""

import math

from torch import nn

from archcalc.codegen.templates.names import EXTRA_STD, LAYERS, RESIDUAL_OUT, RelativeBias


class Normal(nn.Module):
    def reset_parameters(self) -> None:
        """DOC"""
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, mean=0.0, std=self.cfg.init_std)
                if getattr(module, "bias", None) is not None:
                    nn.init.zeros_(module.bias)
        # then each other module's own (norms, routing biases, rotary frequencies, state mixers):
        # after every Linear, and a module after its children (reversed), so that what a module
        # sets in its own layers stays set
        for module in reversed(list(self.modules())):
            if module is not self and not isinstance(module, (nn.Linear, nn.Embedding)):
                if hasattr(module, "reset_parameters"):
                    module.reset_parameters()
        # region: named
        for name, param in self.named_parameters():
            # region: scaled_residual
            # GPT-2: the residual projections scaled down by depth
            if name.endswith(RESIDUAL_OUT):
                std = self.cfg.init_std / math.sqrt(2 * LAYERS)
                nn.init.normal_(param, mean=0.0, std=std)
            # endregion
            # region: extra_std
            if name.endswith(EXTRA_STD):
                nn.init.normal_(param, mean=0.0, std=self.cfg.init_std)
            # endregion
        # endregion


class T5(nn.Module):
    def reset_parameters(self) -> None:
        """(Re)initialise every weight in place as transformers' T5 does: each matrix
        normal(0, init_std / sqrt(fan_in)), the queries' also divided by sqrt(head_width) (T5 does
        not scale its scores); the embedding and an untied head normal(0, init_std), the position
        bias normal(0, init_std / sqrt(width)), norm weights init_std.

        build() calls it; so does a model built on the meta device once it has memory
        (model.to_empty(device=...), e.g. after sharding it with FSDP2)."""
        for name, module in self.named_modules():
            if isinstance(module, RelativeBias):
                std = self.cfg.init_std * self.cfg.width**-0.5
                nn.init.normal_(module.weight, mean=0.0, std=std)
            elif isinstance(module, nn.Embedding) or name == "head":
                nn.init.normal_(module.weight, mean=0.0, std=self.cfg.init_std)
            elif isinstance(module, nn.Linear):
                std = self.cfg.init_std * module.in_features**-0.5
                if name.endswith(".q"):
                    std = std * self.cfg.head_width**-0.5
                nn.init.normal_(module.weight, mean=0.0, std=std)
            elif isinstance(module, nn.RMSNorm):
                nn.init.constant_(module.weight, self.cfg.init_std)


class Xavier(nn.Module):
    def reset_parameters(self) -> None:
        """DOC"""
        for module in self.modules():
            # region: tied
            if module is self.head:
                continue  # tied: the token embeddings, initialised below
            # endregion
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, mean=0.0, std=self.cfg.width**-0.5)
            elif module is not self and hasattr(module, "reset_parameters"):
                module.reset_parameters()  # norms: weight one, bias zero
