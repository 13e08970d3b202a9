/* Included (-include) when the CPU kernels are compiled a second time for
 * the GPU tests: every op_ name becomes cpu_op_, so the CPU reference and
 * the CUDA ops live in one binary (tests/gpu/test_gpu_ops.c). */
#define op_matmul_fwd cpu_op_matmul_fwd
#define op_matmul_bwd cpu_op_matmul_bwd
#define op_matmul_only cpu_op_matmul_only
#define op_matmul_only_end cpu_op_matmul_only_end
#define op_gelu_operand cpu_op_gelu_operand
#define op_layernorm_fwd cpu_op_layernorm_fwd
#define op_residual_layernorm_fwd cpu_op_residual_layernorm_fwd
#define op_layernorm_bwd cpu_op_layernorm_bwd
#define op_gelu_fwd cpu_op_gelu_fwd
#define op_gelu_bwd cpu_op_gelu_bwd
#define op_add cpu_op_add
#define op_embed_fwd cpu_op_embed_fwd
#define op_embed_bwd cpu_op_embed_bwd
#define op_gate_fwd cpu_op_gate_fwd
#define op_gate_bwd cpu_op_gate_bwd
#define op_attention_fwd cpu_op_attention_fwd
#define op_attention_bwd cpu_op_attention_bwd
#define op_attention_probs cpu_op_attention_probs
#define op_attention_apply cpu_op_attention_apply
#define op_attention_decode_fwd cpu_op_attention_decode_fwd
#define op_attention_decode_bwd cpu_op_attention_decode_bwd
#define op_classifier cpu_op_classifier
#define op_logits cpu_op_logits
#define op_adamw cpu_op_adamw
#define op_sumsq cpu_op_sumsq
#define op_threads cpu_op_threads
#define op_alloc cpu_op_alloc
#define op_free cpu_op_free
#define op_upload cpu_op_upload
#define op_download cpu_op_download
#define op_copy cpu_op_copy
#define op_zero cpu_op_zero
#define op_host_memory cpu_op_host_memory
#define op_sync cpu_op_sync
#define op_backend cpu_op_backend
