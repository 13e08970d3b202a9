# Read after the Makefile by tests/e2e_cuda_emu.sh and tests/e2e_cuda_sgtrain_emu.sh
#   make -f Makefile -f tests/emu/print-ldlibs.mk B=build emu-print-ldlibs
# prints the libraries the build links (the BLAS it chose, OpenMP, ...), so
# that the emulated tests link the CPU ops of $(B)/libsg.a, their
# reference, the way the build's own test binaries do.
emu-print-ldlibs:
	@echo $(LDLIBS)

# For tests/e2e_cuda_sgtrain_emu.sh, which builds the CUDA build's host code over the
# emulated kernels: the host objects' flags, and the libraries besides CUDA's.
emu-print-cuda-cflags:
	@echo $(CUDA_CFLAGS)
emu-print-host-libs:
	@echo -lm -fopenmp $(YAML_LIBS) $(JSON_LIBS) $(TOK_LIBS) $(MPI_LIBS)
emu-print-mpi-cflags:
	@echo $(MPI_CFLAGS)
# test_gpu_ops's own objects (the Makefile's GPU_TEST_OBJS)
emu-print-gpu-test-objs:
	@echo $(GPU_TEST_OBJS)
