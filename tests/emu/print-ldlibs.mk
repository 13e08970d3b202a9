# Read after the Makefile by tests/e2e_cuda_emu.sh
#   make -f Makefile -f tests/emu/print-ldlibs.mk B=build emu-print-ldlibs
# prints the libraries the build links (the BLAS it chose, OpenMP, ...), so
# that the emulated tests link the CPU ops of $(B)/libsg.a, their
# reference, the way the build's own test binaries do.
emu-print-ldlibs:
	@echo $(LDLIBS)
