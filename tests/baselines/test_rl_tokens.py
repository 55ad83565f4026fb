"""The RL batch holds exactly the token ids the policy generated: a turn cut by a stop
string keeps the stop string's tokens, a turn cut by the length limit ends on its last
sampled token, and no EOS is appended to either."""

from dataclasses import replace

from esopt.baselines.grpo import GRPOConfig, GRPOTrainer
from esopt.baselines.ppo import PPOConfig, PPOTrainer
from esopt.chat import SamplingParams
from esopt.envs.base import Environment, StepResult, register, registered


class OneTurn(Environment):
    """One turn, 12 new tokens at most, a reward that varies with the text."""

    max_turns = 1
    max_new_tokens = 12

    def reset(self, seed):
        return [{"role": "user", "content": f"Write anything ({seed})."}]

    def step(self, completion):
        return StepResult([], len(set(completion)) / 20, True, {})


if "test_one_turn" not in registered():
    register("test_one_turn")(OneTurn)


def rows_of(batch):
    """Each row's tokens without padding, and its policy (loss-masked) part."""
    out = []
    for ids, attn, mask in zip(batch.input_ids, batch.attention_mask, batch.loss_mask,
                               strict=True):
        n = int(attn.sum())
        out.append((ids[:n].tolist(), ids[:n][mask[:n].bool()].tolist()))
    return out


def check_trained_ids(trainer, episodes, samples):
    tok = trainer.policy.tokenizer
    turns = [t for ep in episodes for t in ep.turns]
    rows = rows_of(trainer.batch(samples))
    assert len(rows) == len(turns)
    for turn, (row, policy_ids) in zip(turns, rows, strict=True):
        prompt = tok(trainer.policy.render(turn.prompt), add_special_tokens=False)["input_ids"]
        assert policy_ids == list(turn.completion_ids)  # what generate sampled, verbatim
        assert row == prompt + list(turn.completion_ids)
        if turn.finish_reason != "eos":
            assert tok.eos_token_id not in policy_ids  # nothing appended
    return {t.finish_reason for t in turns}


def stop_from_a_free_run(trainer, env):
    """A stop string (3 characters from the middle of the first episode's free text)
    that the same rollouts will then meet: they replay the same samples."""
    free = trainer.rollouts(env, {}, [0, 1], 2)
    assert all(t.finish_reason == "length" for ep in free for t in ep.turns)
    return free[0].turns[0].completion[4:7]


def test_grpo_trains_on_the_generated_ids(tiny_policy):
    decoder = SamplingParams(max_new_tokens=12, temperature=1.0)
    trainer = GRPOTrainer(tiny_policy, GRPOConfig(group_size=2, train_decoder=decoder))
    stop = stop_from_a_free_run(trainer, "test_one_turn")
    trainer.decoder = replace(decoder, stop=(stop,))
    episodes = trainer.rollouts("test_one_turn", {}, [0, 1], 2)
    cut = episodes[0].turns[0]
    assert cut.finish_reason == "stop" and stop not in cut.completion
    text = tiny_policy.tokenizer.decode(list(cut.completion_ids), skip_special_tokens=True)
    assert stop in text  # the ids keep the stop string that the text drops
    samples, _ = trainer.samples(episodes)
    assert check_trained_ids(trainer, episodes, samples) == {"stop", "length"}


def test_ppo_trains_on_the_generated_ids(tiny_policy):
    decoder = SamplingParams(max_new_tokens=12, temperature=1.0)
    trainer = PPOTrainer(tiny_policy, PPOConfig(episodes_per_task=2, train_decoder=decoder))
    stop = stop_from_a_free_run(trainer, "test_one_turn")
    trainer.decoder = replace(decoder, stop=(stop,))
    stats = trainer.step("test_one_turn", {}, [0, 1])
    episodes = trainer.last_episodes
    assert stats["tokens"] == sum(len(t.completion_ids) for ep in episodes for t in ep.turns)
    from esopt.baselines.grpo import turn_samples

    samples = turn_samples(tiny_policy, episodes, [0.0] * len(episodes))
    assert check_trained_ids(trainer, episodes, samples) == {"stop", "length"}
