"""Prompt text -> token ids, the one way every part of specviz does it.

The decoder, the recipes that train drafts, the bench and the distribution lab all feed the target
the same ids for the same prompt: the user message wrapped in the chat template with the
assistant's turn opened, or the plain tokenisation when the template is off or absent.
"""

from __future__ import annotations


def prompt_token_ids(tokenizer, prompt: str, chat_template: bool = True) -> list[int]:
    """The prompt as the target reads it (a list of int token ids; may be empty for empty text)."""
    if chat_template and getattr(tokenizer, "chat_template", None):
        ids = tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=True
        )
        return list(ids if isinstance(ids, list) else ids["input_ids"])  # transformers 5: a BatchEncoding
    return list(tokenizer(prompt)["input_ids"])


def prompt_text(tokenizer, prompt: str) -> str:
    """The chat-templated prompt as text: what another engine (llama.cpp, specviz.labs.peer) tokenises
    into the same ids as prompt_token_ids."""
    if not getattr(tokenizer, "chat_template", None):
        return prompt
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=False
    )
