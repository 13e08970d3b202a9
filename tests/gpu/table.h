/* The body of an OpTable; TABLE_NAME and the op_ names decide which. */
const OpTable TABLE_NAME = {op_matmul_fwd,             op_matmul_bwd,             op_layernorm_fwd,
                            op_residual_layernorm_fwd, op_layernorm_bwd,          op_gelu_fwd,
                            op_gelu_bwd,               op_gelu_tanh_fwd,          op_gelu_tanh_bwd,
                            op_add,                    op_bias_add,               op_bias_bwd,
                            op_rope,                   op_embed_fwd,              op_embed_bwd,
                            op_gate_fwd,               op_gate_bwd,               op_attention_fwd,
                            op_attention_bwd,          op_attention_gate_bwd,     op_attention_probs,
                            op_attention_apply,
                            op_attention_decode_fwd,   op_attention_decode_bwd,   op_classifier,
                            op_logits,                 op_adamw,                  op_adamw_multi,
                            op_sumsq,                  op_alloc,                  op_free,
                            op_upload,                 op_download,               op_backend};
