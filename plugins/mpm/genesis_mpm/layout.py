"""Column layout of MPM's packed parameter array `params_f` (one small array keeps the kernels' argument lists
short). Each constant names the first column of a quantity.

params_f: substep dt (s), dx (m), 1 / dx, the grid's origin (3, m: the lower bound less the padding), gravity
(3, m/s^2), wall friction, the floor's height above the lower bound in whole cells."""

PF_DT, PF_DX, PF_INV_DX, PF_ORIGIN, PF_GRAVITY, PF_FRICTION, PF_FLOOR, PF_N = 0, 1, 2, 3, 6, 9, 10, 11

# a particle's material parameters, p_params [n_particles, 3]: what each material's kernel_params() gives after
# its kind (ElastoPlastic: yield stress; Liquid: viscosity; Sand: the Drucker-Prager alpha; Snow: theta_c,
# theta_s, hardening)
PP_N = 3
