"""How the shipped drafts were made: the draft head's recipe (`train_head`, its data in
`head_data`, its unrolled forward and loss in `head_unroll`, its held-out measure in `head_eval`),
the distilled draft model's (`train_draft`), their prompts (`prompt_pool`, `self_prompts`), what
the recipes share (`recipe`) and the records the Drafters page reads (`training_record`).
"""
