/* sgtrain (fp32, as it trains) against the PyTorch twin (float64).
 * Tolerances: loss within 1e-5 relative (the bar); logits 1e-5
 * absolute + relative; each gradient within 1e-4 relative or 1e-5 of the
 * tensor's largest entry; the 10-step trajectory's losses 1e-5 relative and
 * final parameters 1e-5 absolute + 1e-4 relative. */
#include "twin_check.h"

int main(void) {
    const Tol tol = {1e-5, 1e-5, 1e-5, 1e-5, 1e-4, 1e-5, 1e-4};
    return twin_main("twin-f32", &tol);
}
