//! Rendering a chat template for one turn, by recognising the common template families.
//!
//! A full renderer would need a Jinja interpreter; anyspec only needs the prompt for one user
//! message (and an optional system message) with the generation prompt, so it recognises the
//! families by their marker tokens and renders them directly:
//!
//! - ChatML (`<|im_start|>`: SmolLM, Qwen, many fine-tunes). A default system message that the
//!   template writes when the conversation has none (SmolLM2's "You are a helpful AI assistant
//!   named SmolLM…") is found in the template and used when `system` is `None`.
//! - Llama 3 (`<|start_header_id|>`).
//! - Llama 2 (`[INST]`, also Mistral's instruct models).
//!
//! The BOS token is never part of the text: tokenizers add it themselves (see
//! [`GgufTokenizer::add_bos`](super::GgufTokenizer::add_bos)).

use crate::error::{Error, Result};

/// Renders `template` (a model's `tokenizer.chat_template`) for one user message, with an
/// optional system message, followed by the prompt that starts the assistant's reply.
///
/// ```
/// let chatml = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}";
/// let text = anyspec_gguf::tokenizer::apply_chat_template(chatml, None, "Hi")?;
/// assert_eq!(text, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
/// # Ok::<(), anyspec_gguf::Error>(())
/// ```
pub fn apply_chat_template(template: &str, system: Option<&str>, user: &str) -> Result<String> {
    let mut out = String::new();
    if template.contains("<|im_start|>") {
        let system = system.map(str::to_string).or_else(|| chatml_default_system(template));
        if let Some(system) = system {
            out.push_str(&format!("<|im_start|>system\n{system}<|im_end|>\n"));
        }
        out.push_str(&format!("<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"));
    } else if template.contains("<|start_header_id|>") {
        if let Some(system) = system {
            out.push_str(&format!("<|start_header_id|>system<|end_header_id|>\n\n{system}<|eot_id|>"));
        }
        out.push_str(&format!(
            "<|start_header_id|>user<|end_header_id|>\n\n{user}<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
        ));
    } else if template.contains("[INST]") {
        match system {
            Some(system) => out.push_str(&format!("[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST]")),
            None => out.push_str(&format!("[INST] {user} [/INST]")),
        }
    } else {
        let first_line: String =
            template.lines().find(|l| !l.trim().is_empty()).unwrap_or("").chars().take(120).collect();
        return Err(Error::UnsupportedChatTemplate { first_line });
    }
    Ok(out)
}

/// The system message a ChatML template writes when the conversation has none: the literal
/// between `<|im_start|>system` + newline and `<|im_end|>` in a quoted template string (the
/// newline written as a real newline or as the Jinja escape `\n`).
fn chatml_default_system(template: &str) -> Option<String> {
    const OPEN: &str = "<|im_start|>system";
    let mut rest = template;
    while let Some(at) = rest.find(OPEN) {
        let after = &rest[at + OPEN.len()..];
        rest = after;
        let Some(body) = after.strip_prefix('\n').or_else(|| after.strip_prefix("\\n")) else {
            continue;
        };
        let Some(end) = body.find("<|im_end|>") else {
            continue;
        };
        let text = &body[..end];
        // A literal, not an expression that splices in the conversation's own system message.
        if text.is_empty() || text.contains(['\'', '"', '{', '}', '+']) {
            continue;
        }
        return Some(text.replace("\\n", "\n"));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMOLLM2: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

    #[test]
    fn smollm2_uses_its_default_system_message() {
        let text = apply_chat_template(SMOLLM2, None, "Hi").unwrap();
        assert_eq!(
            text,
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
        let text = apply_chat_template(SMOLLM2, Some("Be brief."), "Hi").unwrap();
        assert!(text.starts_with("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n"));
    }

    #[test]
    fn escaped_newlines_in_the_default_are_unescaped() {
        let t = r"{{ '<|im_start|>system\nYou are Qwen.<|im_end|>\n' }}";
        assert_eq!(chatml_default_system(t).as_deref(), Some("You are Qwen."));
        let spliced = r"{{ '<|im_start|>system\n' + message['content'] + '<|im_end|>' }}";
        assert_eq!(chatml_default_system(spliced), None);
    }

    #[test]
    fn the_default_is_found_after_other_system_blocks() {
        // Qwen 2.5's template opens a system block for tools first, then splices the
        // conversation's system message, and only then writes its default.
        let qwen25 = concat!(
            r"{%- if tools %}{{- '<|im_start|>system' }}{%- if messages[0]['role'] == 'system' %}",
            r"{{- messages[0]['content'] }}{%- endif %}{%- else %}{%- if messages[0]['role'] == 'system' %}",
            r"{{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}{%- else %}",
            r"{{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}",
            r"{%- endif %}{%- endif %}",
        );
        assert_eq!(
            chatml_default_system(qwen25).as_deref(),
            Some("You are Qwen, created by Alibaba Cloud. You are a helpful assistant.")
        );
    }

    #[test]
    fn llama_templates() {
        let l3 = "{% set loop_messages = messages %}<|start_header_id|>";
        let text = apply_chat_template(l3, Some("S"), "U").unwrap();
        assert_eq!(
            text,
            "<|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nU<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
        );
        let l2 = "{{ bos_token + '[INST] ' + content + ' [/INST]' }}";
        assert_eq!(apply_chat_template(l2, None, "U").unwrap(), "[INST] U [/INST]");
        assert_eq!(apply_chat_template(l2, Some("S"), "U").unwrap(), "[INST] <<SYS>>\nS\n<</SYS>>\n\nU [/INST]");
    }

    #[test]
    fn unknown_templates_are_named() {
        let err = apply_chat_template("\n{% for m in messages %}<start_of_turn>", None, "U").unwrap_err().to_string();
        assert!(err.contains("{% for m in messages %}<start_of_turn>"), "{err}");
    }
}
