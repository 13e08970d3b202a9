/* sgtrain (double build) against the PyTorch twin (float64): the same math
 * must agree to ~1e-9, whatever the order of the operations. */
#include "twin_check.h"

int main(void) {
    const Tol tol = {1e-11, 1e-9, 1e-11, 1e-9, 1e-8, 1e-11, 1e-9};
    return twin_main("twin-f64", &tol);
}
