//! [`ModelSpec`]: the architecture of a model to train, and its Hugging Face `config.json`.

use serde_json::json;

use crate::error::{Error, Result};

/// The shape of a Llama decoder to train. Embeddings are always tied to the LM head: for the
/// small demo models the embedding matrix is most of the parameters, so tying halves the size.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelSpec {
    /// Rows of the embedding matrix: the tokenizer's vocabulary size, added tokens included.
    pub vocab_size: usize,
    /// Width of the residual stream.
    pub hidden_size: usize,
    /// Width of the SwiGLU MLP.
    pub intermediate_size: usize,
    /// Decoder layers.
    pub num_layers: usize,
    /// Query heads.
    pub num_heads: usize,
    /// Key/value heads; fewer than `num_heads` gives grouped-query attention.
    pub num_kv_heads: usize,
    /// The context window written to `config.json` (`max_position_embeddings`).
    pub max_position_embeddings: usize,
    /// RoPE base.
    pub rope_theta: f64,
    /// RMSNorm epsilon.
    pub rms_norm_eps: f64,
    /// The token that ends a document (`eos_token_id`; also written as `bos_token_id`).
    pub eos_token_id: u32,
}

impl ModelSpec {
    /// Checks that the shape is one `anyspec-models` and `transformers` can both load.
    pub fn validate(&self) -> Result<()> {
        let invalid =
            |field, value: usize, reason| Err(Error::InvalidSetting { field, value: value.to_string(), reason });
        for (field, value) in [
            ("vocab_size", self.vocab_size),
            ("hidden_size", self.hidden_size),
            ("intermediate_size", self.intermediate_size),
            ("num_layers", self.num_layers),
            ("num_heads", self.num_heads),
            ("num_kv_heads", self.num_kv_heads),
            ("max_position_embeddings", self.max_position_embeddings),
        ] {
            if value == 0 {
                return invalid(field, value, "it must be positive");
            }
        }
        if !self.hidden_size.is_multiple_of(self.num_heads) {
            return invalid("num_heads", self.num_heads, "it must divide hidden_size");
        }
        if !self.head_dim().is_multiple_of(2) {
            return invalid("num_heads", self.num_heads, "hidden_size / num_heads must be even for rotary embeddings");
        }
        if !self.num_heads.is_multiple_of(self.num_kv_heads) {
            return invalid("num_kv_heads", self.num_kv_heads, "it must divide num_heads");
        }
        if self.eos_token_id as usize >= self.vocab_size {
            return invalid("eos_token_id", self.eos_token_id as usize, "it must be below vocab_size");
        }
        Ok(())
    }

    /// Width of one attention head.
    pub fn head_dim(&self) -> usize {
        self.hidden_size / self.num_heads
    }

    /// Number of trained parameters (tied embeddings counted once).
    pub fn parameter_count(&self) -> usize {
        let h = self.hidden_size;
        let kv = self.num_kv_heads * self.head_dim();
        let layer = 2 * h + h * h * 2 + h * kv * 2 + 3 * h * self.intermediate_size;
        self.vocab_size * h + self.num_layers * layer + h
    }

    /// The `config.json` of a Hugging Face `LlamaForCausalLM` with this shape.
    pub fn hf_config(&self) -> serde_json::Value {
        json!({
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.num_layers,
            "num_attention_heads": self.num_heads,
            "num_key_value_heads": self.num_kv_heads,
            "head_dim": self.head_dim(),
            "hidden_act": "silu",
            "max_position_embeddings": self.max_position_embeddings,
            "rms_norm_eps": self.rms_norm_eps,
            "rope_theta": self.rope_theta,
            "rope_scaling": null,
            "tie_word_embeddings": true,
            "attention_bias": false,
            "mlp_bias": false,
            "bos_token_id": self.eos_token_id,
            "eos_token_id": self.eos_token_id,
            "torch_dtype": "float16",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> ModelSpec {
        ModelSpec {
            vocab_size: 100,
            hidden_size: 16,
            intermediate_size: 32,
            num_layers: 2,
            num_heads: 4,
            num_kv_heads: 2,
            max_position_embeddings: 64,
            rope_theta: 10_000.0,
            rms_norm_eps: 1e-5,
            eos_token_id: 0,
        }
    }

    #[test]
    fn parameter_count_matches_a_hand_count() {
        // embed 100·16 + 2 × (norms 32 + q,o 2·256 + k,v 2·16·8 + mlp 3·16·32) + final norm 16.
        assert_eq!(spec().parameter_count(), 1600 + 2 * (32 + 512 + 256 + 1536) + 16);
    }

    #[test]
    fn inconsistent_heads_are_refused_with_the_field_named() {
        let err = ModelSpec { num_kv_heads: 3, ..spec() }.validate().unwrap_err().to_string();
        assert!(err.contains("num_kv_heads = 3"), "{err}");
        let err = ModelSpec { num_heads: 3, ..spec() }.validate().unwrap_err().to_string();
        assert!(err.contains("num_heads = 3"), "{err}");
        assert!(spec().validate().is_ok());
    }
}
