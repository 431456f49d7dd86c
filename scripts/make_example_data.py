#!/usr/bin/env python3
"""Writes the small example logits files in examples/data (numpy only, fixed seed).

The logits look like a language model's: a Zipf-like prior over a made-up vocabulary, heavy-tailed
noise, and a few dominant next-token candidates per position, taken from two tiny "prompts" so
that `sampler topk ... --vocab examples/data/vocab.txt` reads sensibly.

    python3 scripts/make_example_data.py [--out examples/data]

Files (about 200 KB together):
    logits_f32.npy          [2, 3, 4096] float32   two prompts, three decode steps each
    logits_f16.npy          [4, 4096]    float16   peaked, flat, masked (-inf) and confident rows
    logits_bf16.safetensors [1, 2, 4096] BF16      one tensor, "logits"
    vocab.txt               4096 tokens, one per line (line i is token id i)
"""
import argparse
import json
import pathlib

import numpy as np

VOCAB_SIZE = 4096
SEED = 20240521

SPECIAL = ["<unk>", "<s>", "</s>", "<pad>"]
WORDS = (
    "the a an and or but of to in on at by for with from as is was are were be been it its this that "
    "there then than when where which who what how why not no yes all any some one two three four five "
    "cat dog bird fish mat floor sofa chair table bed door window house garden tree sun moon star sky "
    "time day night year way man woman child king queen story world life hand eye head heart "
    "sat ran saw said went came made took gave found lived looked thought knew upon once "
    "big small old new good bad little long great happy quiet dark bright warm cold red blue green"
).split()
PUNCTUATION = [".", ",", "!", "?", ";", ":", "'", '"', "(", ")", "-", "\\n"]
ONSETS = ["b", "c", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z", "br", "ch",
          "st", "th", "tr"]
VOWELS = ["a", "e", "i", "o", "u", "ai", "ea", "ou"]
CODAS = ["", "n", "r", "s", "t", "l", "ng", "ck"]


def make_vocab():
    """4096 unique readable tokens: specials, words with and without a leading space (as BPE
    vocabularies have them), punctuation, digits, then made-up syllables."""
    tokens = list(SPECIAL)
    for word in WORDS:
        tokens += [" " + word, word]
    for word in ["The", "It", "Once", "He", "She", "They"]:
        tokens += [" " + word, word]
    tokens += PUNCTUATION + [str(d) for d in range(10)]
    syllables = [o + v + c for o in ONSETS for v in VOWELS for c in CODAS]
    open_syllables = [o + v for o in ONSETS for v in VOWELS]
    made_up = syllables + [a + b for a in open_syllables for b in syllables]  # one, then two syllables
    seen = set(tokens)
    for stem in made_up:
        for token in (" " + stem, stem):
            if token not in seen and len(tokens) < VOCAB_SIZE:
                seen.add(token)
                tokens.append(token)
    assert len(tokens) == VOCAB_SIZE, len(tokens)
    return tokens


def make_logits(rng, rows, ids, candidates):
    """`rows` rows of logits. candidates[r] lists (token, boost) pairs that dominate row r."""
    # A fixed token "frequency" order gives every row the same Zipf-like prior: log p ~ -1.1 log(rank).
    rank = np.empty(VOCAB_SIZE)
    rank[rng.permutation(VOCAB_SIZE)] = np.arange(1, VOCAB_SIZE + 1)
    prior = -1.1 * np.log(rank)
    logits = np.empty((rows, VOCAB_SIZE), dtype=np.float64)
    for r in range(rows):
        noise = 0.9 * rng.standard_t(df=4, size=VOCAB_SIZE)  # heavy tails: a few surprising tokens
        row = prior + noise
        top = row.max()
        for token, boost in candidates[r]:
            row[ids[token]] = top + boost
        logits[r] = row + rng.uniform(2.0, 6.0)  # models' logits are not centred at 0
    return logits


def bf16_bytes(values):
    """float32 -> bfloat16 bit patterns, rounding to nearest even (what torch does)."""
    bits = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype("<u2").tobytes()


def write_safetensors(path, name, shape, dtype, data):
    header = {"__metadata__": {"source": "scripts/make_example_data.py"},
              name: {"dtype": dtype, "shape": list(shape), "data_offsets": [0, len(data)]}}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the format recommends 8-byte aligned data
    path.write_bytes(len(text).to_bytes(8, "little") + text + data)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(pathlib.Path(__file__).resolve().parent.parent / "examples" / "data"))
    out = pathlib.Path(parser.parse_args().out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(SEED)

    tokens = make_vocab()
    ids = {token: i for i, token in enumerate(tokens)}
    # vocab.txt writes a newline token as the two characters \n: one token per line must hold.
    (out / "vocab.txt").write_text("".join(token + "\n" for token in tokens), encoding="utf-8")

    # [2, 3, V]: "The cat sat on the" -> " mat" "." " It"; "Once upon a" -> " time" "," " there".
    story = [
        [(" mat", 4.0), (" floor", 3.2), (" sofa", 2.5), (" bed", 1.8), (" table", 1.0)],
        [(".", 3.5), (",", 2.6), (" and", 2.0), ("!", 0.5)],
        [(" It", 2.2), (" The", 2.0), ("\\n", 1.6), (" She", 1.0)],
        [(" time", 9.0), (" day", 2.0), (" night", 1.5)],
        [(",", 5.0), (" there", 2.0), (".", 1.0)],
        [(" there", 3.0), (" a", 2.4), (" the", 2.2), (" once", 0.8)],
    ]
    f32 = make_logits(rng, 6, ids, story).astype(np.float32).reshape(2, 3, VOCAB_SIZE)
    np.save(out / "logits_f32.npy", f32)

    # [4, V] f16: a peaked row, a flat (uncertain) row, a row with banned tokens at -inf, and a
    # confident row.
    rows = [
        [(" cat", 6.0), (" dog", 3.0)],
        [(" red", 0.3), (" blue", 0.2), (" green", 0.1), (" dark", 0.1), (" warm", 0.0)],
        [(" the", 2.0), (" a", 1.8)],
        [(" king", 12.0)],
    ]
    f16 = make_logits(rng, 4, ids, rows)
    f16[1] = 0.25 * f16[1]  # flatter: a high-entropy row
    f16[2, rng.choice(VOCAB_SIZE, size=64, replace=False)] = -np.inf  # masked by a logits processor
    f16[2, ids[" the"]] = f16[2].max() + 2.0  # keep the intended winner (masking may have hit it)
    np.save(out / "logits_f16.npy", f16.astype(np.float16))

    # [1, 2, V] bf16: "The" -> " cat" "sat".
    bf16 = make_logits(rng, 2, ids, [[(" cat", 3.0), (" king", 2.5), (" sun", 2.0)],
                                     [(" sat", 3.5), (" ran", 2.8), (" saw", 1.5)]])
    write_safetensors(out / "logits_bf16.safetensors", "logits", (1, 2, VOCAB_SIZE), "BF16",
                      bf16_bytes(bf16.astype(np.float32)))


if __name__ == "__main__":
    main()
