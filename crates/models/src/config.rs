//! `config.json` of a Hugging Face Llama-family checkpoint → a validated [`LlamaConfig`].
//!
//! Llama 2/3, TinyLlama, Mistral and Qwen2 share one architecture (pre-norm decoder, RMSNorm,
//! rotary embeddings, SwiGLU, grouped-query attention) and differ only in flags: q/k/v biases
//! (Qwen2), tied embeddings, RoPE scaling (Llama 3) and a sliding attention window (Mistral).

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use crate::error::{Error, Result};

/// How rotary frequencies are rescaled for long contexts.
#[derive(Clone, Debug, PartialEq)]
pub enum RopeScaling {
    /// Plain RoPE.
    None,
    /// Positions divided by `factor` (`rope_type: "linear"`).
    Linear {
        /// The scale factor.
        factor: f64,
    },
    /// Llama 3.1's frequency-dependent scaling (`rope_type: "llama3"`), as in
    /// `transformers.modeling_rope_utils._compute_llama3_parameters`.
    Llama3 {
        /// How much the low frequencies are slowed down.
        factor: f64,
        /// Wavelengths above `original_max_position_embeddings / low_freq_factor` are scaled.
        low_freq_factor: f64,
        /// Wavelengths below `original_max_position_embeddings / high_freq_factor` are kept.
        high_freq_factor: f64,
        /// The context length the model was pre-trained with.
        original_max_position_embeddings: f64,
    },
}

/// The architecture parameters of a Llama-family decoder, checked for consistency.
#[derive(Clone, Debug, PartialEq)]
pub struct LlamaConfig {
    /// `llama`, `mistral` or `qwen2`.
    pub model_type: String,
    /// Rows of the embedding matrix (and logits per position).
    pub vocab_size: usize,
    /// Width of the residual stream.
    pub hidden_size: usize,
    /// Width of the SwiGLU MLP.
    pub intermediate_size: usize,
    /// Decoder layers.
    pub num_layers: usize,
    /// Query heads.
    pub num_heads: usize,
    /// Key/value heads (fewer than query heads for grouped-query attention).
    pub num_kv_heads: usize,
    /// Width of one head.
    pub head_dim: usize,
    /// RMSNorm epsilon.
    pub rms_norm_eps: f64,
    /// RoPE base.
    pub rope_theta: f64,
    /// RoPE rescaling.
    pub rope_scaling: RopeScaling,
    /// The context window: the longest sequence the model scores.
    pub max_position_embeddings: usize,
    /// Whether the LM head reuses the embedding matrix.
    pub tie_word_embeddings: bool,
    /// Whether q/k/v projections have biases (Qwen2; Llama with `attention_bias`).
    pub qkv_bias: bool,
    /// Whether the output projection has a bias (Llama with `attention_bias`).
    pub o_bias: bool,
    /// Whether the MLP projections have biases (Llama with `mlp_bias`).
    pub mlp_bias: bool,
    /// Keys further back than this many positions are not attended to (Mistral).
    pub sliding_window: Option<usize>,
    /// Tokens that end generation (`eos_token_id`, one id or a list).
    pub eos_token_ids: Vec<u32>,
    /// `bos_token_id`, if any.
    pub bos_token_id: Option<u32>,
}

/// The fields we read; everything else in `config.json` is ignored.
#[derive(Debug, Deserialize)]
struct RawConfig {
    model_type: Option<String>,
    vocab_size: usize,
    hidden_size: usize,
    intermediate_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    num_key_value_heads: Option<usize>,
    head_dim: Option<usize>,
    rms_norm_eps: Option<f64>,
    rope_theta: Option<f64>,
    rope_scaling: Option<Value>,
    rope_parameters: Option<Value>,
    max_position_embeddings: Option<usize>,
    tie_word_embeddings: Option<bool>,
    attention_bias: Option<bool>,
    mlp_bias: Option<bool>,
    sliding_window: Option<usize>,
    use_sliding_window: Option<bool>,
    hidden_act: Option<String>,
    eos_token_id: Option<Value>,
    bos_token_id: Option<u32>,
}

impl LlamaConfig {
    /// Reads and validates `config.json`.
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Io { path: path.to_owned(), source })?;
        Self::from_json(&text).map_err(|err| match err {
            Error::Config { message, .. } => Error::Config { path: path.to_owned(), message },
            other => other,
        })
    }

    /// Parses and validates the text of a `config.json`.
    pub fn from_json(text: &str) -> Result<Self> {
        let config_error = |message: String| Error::Config { path: "config.json".into(), message };
        let raw: RawConfig = serde_json::from_str(text).map_err(|e| config_error(e.to_string()))?;
        let model_type = raw.model_type.unwrap_or_default();
        let (qkv_bias, o_bias) = match model_type.as_str() {
            "llama" | "mistral" => (raw.attention_bias.unwrap_or(false), raw.attention_bias.unwrap_or(false)),
            "qwen2" => (true, false),
            _ => return Err(Error::UnsupportedModelType { model_type }),
        };
        if let Some(act) = &raw.hidden_act
            && act != "silu"
        {
            return Err(Error::UnsupportedConfig {
                field: "hidden_act",
                value: act.clone(),
                reason: "only the SwiGLU MLP with silu is implemented",
            });
        }
        let num_kv_heads = raw.num_key_value_heads.unwrap_or(raw.num_attention_heads);
        positive("vocab_size", raw.vocab_size)?;
        positive("hidden_size", raw.hidden_size)?;
        positive("intermediate_size", raw.intermediate_size)?;
        positive("num_hidden_layers", raw.num_hidden_layers)?;
        positive("num_attention_heads", raw.num_attention_heads)?;
        positive("num_key_value_heads", num_kv_heads)?;
        if !raw.num_attention_heads.is_multiple_of(num_kv_heads) {
            return Err(Error::UnsupportedConfig {
                field: "num_key_value_heads",
                value: num_kv_heads.to_string(),
                reason: "it must divide num_attention_heads",
            });
        }
        let head_dim = match raw.head_dim {
            Some(d) => d,
            None if raw.hidden_size.is_multiple_of(raw.num_attention_heads) => {
                raw.hidden_size / raw.num_attention_heads
            }
            None => {
                return Err(Error::UnsupportedConfig {
                    field: "num_attention_heads",
                    value: raw.num_attention_heads.to_string(),
                    reason: "it must divide hidden_size when head_dim is not given",
                });
            }
        };
        if head_dim == 0 || head_dim % 2 != 0 {
            return Err(Error::UnsupportedConfig {
                field: "head_dim",
                value: head_dim.to_string(),
                reason: "rotary embeddings need an even, positive head dimension",
            });
        }
        let sliding_window = match model_type.as_str() {
            "mistral" => raw.sliding_window,
            "qwen2" if raw.use_sliding_window == Some(true) => {
                return Err(Error::UnsupportedConfig {
                    field: "use_sliding_window",
                    value: "true".into(),
                    reason: "Qwen2's per-layer sliding window is not implemented",
                });
            }
            _ => None,
        };
        // transformers ≥ 5 moves rope_theta and the scaling into `rope_parameters`.
        let rope_parameters = raw.rope_parameters.as_ref();
        let rope_theta = raw
            .rope_theta
            .or_else(|| rope_parameters.and_then(|p| p.get("rope_theta")).and_then(Value::as_f64))
            .unwrap_or(10_000.0);
        let rope_scaling = parse_rope_scaling(raw.rope_scaling.as_ref().or(rope_parameters))?;
        let rms_norm_eps = raw.rms_norm_eps.unwrap_or(1e-6);
        // Checked here rather than met later as "logits contain NaN": a zero or negative base
        // makes every rotary frequency NaN or infinite, a zero epsilon divides a zero row by zero.
        positive_number("rope_theta", rope_theta, "it must be a positive number (the RoPE base, e.g. 10000)")?;
        positive_number("rms_norm_eps", rms_norm_eps, "it must be a positive number (e.g. 1e-5)")?;
        // An id outside the vocabulary would never be generated, so generation would run past the
        // real end of sequence: refuse it, and every value that is not an id, rather than drop it.
        let in_vocabulary = |field: &str, value: &Value| -> Result<u32> {
            value
                .as_u64()
                .and_then(|id| u32::try_from(id).ok())
                .filter(|&id| (id as usize) < raw.vocab_size)
                .ok_or_else(|| {
                    config_error(format!(
                        "{field} {value} is not a token id of the model (vocab_size {}, ids 0 to {}); the \
                         configuration does not belong to these weights",
                        raw.vocab_size,
                        raw.vocab_size - 1
                    ))
                })
        };
        let eos_token_ids = match &raw.eos_token_id {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => {
                items.iter().map(|item| in_vocabulary("eos_token_id", item)).collect::<Result<Vec<u32>>>()?
            }
            Some(one) => vec![in_vocabulary("eos_token_id", one)?],
        };
        let bos_token_id = raw.bos_token_id.map(|id| in_vocabulary("bos_token_id", &Value::from(id))).transpose()?;
        Ok(LlamaConfig {
            model_type,
            vocab_size: raw.vocab_size,
            hidden_size: raw.hidden_size,
            intermediate_size: raw.intermediate_size,
            num_layers: raw.num_hidden_layers,
            num_heads: raw.num_attention_heads,
            num_kv_heads,
            head_dim,
            rms_norm_eps,
            rope_theta,
            rope_scaling,
            max_position_embeddings: raw.max_position_embeddings.unwrap_or(2048),
            tie_word_embeddings: raw.tie_word_embeddings.unwrap_or(false),
            qkv_bias,
            o_bias,
            mlp_bias: raw.mlp_bias.unwrap_or(false),
            sliding_window,
            eos_token_ids,
            bos_token_id,
        })
    }
}

fn positive(field: &'static str, value: usize) -> Result<()> {
    if value == 0 {
        return Err(Error::UnsupportedConfig { field, value: "0".into(), reason: "it must be at least 1" });
    }
    Ok(())
}

/// Refuses a value that is not a finite number above zero.
fn positive_number(field: &'static str, value: f64, reason: &'static str) -> Result<()> {
    if !(value.is_finite() && value > 0.0) {
        return Err(Error::UnsupportedConfig { field, value: value.to_string(), reason });
    }
    Ok(())
}

fn parse_rope_scaling(value: Option<&Value>) -> Result<RopeScaling> {
    let Some(Value::Object(map)) = value else {
        return Ok(RopeScaling::None);
    };
    let kind = map.get("rope_type").or_else(|| map.get("type")).and_then(Value::as_str).unwrap_or("default");
    let number = |key: &'static str| {
        map.get(key).and_then(Value::as_f64).ok_or(Error::UnsupportedConfig {
            field: "rope_scaling",
            value: Value::Object(map.clone()).to_string(),
            reason: "a required number is missing (factor, low_freq_factor, high_freq_factor or \
                     original_max_position_embeddings)",
        })
    };
    let factor = || -> Result<f64> {
        let factor = number("factor")?;
        positive_number("rope_scaling", factor, "its factor must be a positive number")?;
        Ok(factor)
    };
    match kind {
        "default" => Ok(RopeScaling::None),
        "linear" => Ok(RopeScaling::Linear { factor: factor()? }),
        "llama3" => Ok(RopeScaling::Llama3 {
            factor: factor()?,
            low_freq_factor: number("low_freq_factor")?,
            high_freq_factor: number("high_freq_factor")?,
            original_max_position_embeddings: number("original_max_position_embeddings")?,
        }),
        other => Err(Error::UnsupportedConfig {
            field: "rope_scaling",
            value: other.to_string(),
            reason: "supported rope types: default, linear, llama3",
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TINY: &str = r#"{"model_type":"llama","vocab_size":32,"hidden_size":16,"intermediate_size":40,
        "num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"rms_norm_eps":1e-5,
        "rope_theta":500000.0,"max_position_embeddings":64,"eos_token_id":[2,3],
        "rope_scaling":{"rope_type":"llama3","factor":8.0,"low_freq_factor":1.0,"high_freq_factor":4.0,
        "original_max_position_embeddings":16}}"#;

    #[test]
    fn llama3_config_parses_with_gqa_and_scaling() {
        let c = LlamaConfig::from_json(TINY).unwrap();
        assert_eq!((c.num_heads, c.num_kv_heads, c.head_dim), (4, 2, 4));
        assert_eq!(c.eos_token_ids, vec![2, 3]);
        assert!(matches!(c.rope_scaling, RopeScaling::Llama3 { factor, .. } if factor == 8.0));
        assert!(!c.qkv_bias && !c.tie_word_embeddings);
    }

    #[test]
    fn qwen2_has_qkv_bias_and_no_output_bias() {
        let text = TINY.replace("\"llama\"", "\"qwen2\"");
        let c = LlamaConfig::from_json(&text).unwrap();
        assert!(c.qkv_bias && !c.o_bias);
    }

    #[test]
    fn unsupported_model_type_is_named() {
        let err = LlamaConfig::from_json(&TINY.replace("\"llama\"", "\"gpt2\"")).unwrap_err().to_string();
        assert!(err.contains("\"gpt2\"") && err.contains("llama"), "{err}");
    }

    #[test]
    fn heads_that_do_not_divide_are_rejected() {
        let err = LlamaConfig::from_json(&TINY.replace("\"num_key_value_heads\":2", "\"num_key_value_heads\":3"));
        assert!(err.unwrap_err().to_string().contains("num_key_value_heads"));
    }

    #[test]
    fn unknown_rope_type_is_rejected() {
        let err = LlamaConfig::from_json(&TINY.replace("\"llama3\"", "\"yarn\"")).unwrap_err().to_string();
        assert!(err.contains("yarn"), "{err}");
    }

    #[test]
    fn non_positive_rope_theta_and_rms_norm_eps_are_refused_up_front() {
        for (field, good, bad) in [
            ("rope_theta", "500000.0", "0.0"),
            ("rope_theta", "500000.0", "-1.0"),
            ("rms_norm_eps", "1e-5", "0"),
            ("rms_norm_eps", "1e-5", "-1e-5"),
        ] {
            let text = TINY.replace(&format!("\"{field}\":{good}"), &format!("\"{field}\":{bad}"));
            assert_ne!(text, TINY);
            let err = LlamaConfig::from_json(&text).unwrap_err().to_string();
            assert!(err.contains(field) && err.contains("positive"), "{field} = {bad}: {err}");
        }
        let zero_factor = TINY.replace("\"factor\":8.0", "\"factor\":0.0");
        assert!(LlamaConfig::from_json(&zero_factor).unwrap_err().to_string().contains("factor"));
    }

    #[test]
    fn eos_ids_outside_the_vocabulary_or_not_ids_are_refused() {
        for bad in ["32", "[2,40]", "-1", "2.5", "4294967298", "\"2\""] {
            let text = TINY.replace("\"eos_token_id\":[2,3]", &format!("\"eos_token_id\":{bad}"));
            let err = LlamaConfig::from_json(&text).unwrap_err().to_string();
            assert!(err.contains("eos_token_id") && err.contains("vocab_size 32"), "{bad}: {err}");
        }
        let one = LlamaConfig::from_json(&TINY.replace("\"eos_token_id\":[2,3]", "\"eos_token_id\":31")).unwrap();
        assert_eq!(one.eos_token_ids, vec![31]);
        let bos = TINY.replace("\"eos_token_id\"", "\"bos_token_id\":32,\"eos_token_id\"");
        assert!(LlamaConfig::from_json(&bos).unwrap_err().to_string().contains("bos_token_id 32"));
    }

    #[test]
    fn transformers_v5_rope_parameters_are_read() {
        let text = r#"{"model_type":"llama","vocab_size":32,"hidden_size":16,"intermediate_size":40,
            "num_hidden_layers":1,"num_attention_heads":4,
            "rope_parameters":{"rope_type":"default","rope_theta":1234.0}}"#;
        let c = LlamaConfig::from_json(text).unwrap();
        assert_eq!(c.rope_theta, 1234.0);
        assert_eq!(c.rope_scaling, RopeScaling::None);
    }
}
