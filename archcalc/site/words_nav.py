"""The translated pages' titles in the navigation, in each language (page -> language -> title)."""

from __future__ import annotations

from archcalc.site.i18n import Messages

TITLES: Messages = {
    "index.md": {"en": "Home", "ja": "ホーム", "zh": "首页"},
    "tutorial.md": {"en": "Write your first spec", "ja": "はじめての spec", "zh": "编写你的第一个 spec"},
    "gpt2-parameters.md": {"en": "GPT-2: where every parameter goes", "ja": "GPT-2：パラメータはどこにあるのか",
                           "zh": "GPT-2：每个参数都在哪里"},
}
